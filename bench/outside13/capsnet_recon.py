"""A hand-written capsule network (Sabour et al.) on 20 x 20 images: a 5x5 conv to 32 channels + in-place ReLU, primary capsules (a strided 5x5 conv to 8 capsule types of dimension 4, reshaped to capsules and squashed), digit capsules by dynamic routing (a transformation weight per (input capsule, output capsule) pair, einsum to predictions, 3 routing iterations of softmax coupling, weighted sum, squash and agreement update, the routing logits carried across iterations and the predictions detached in all but the last), the margin loss on the capsule lengths plus a reconstruction loss from a small decoder (the true class's capsule masked in, two linear layers, sigmoid) scaled by 0.0005."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
def squash(s, dim=-1):
    n2 = (s * s).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)
class CapsNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 5)
        self.relu = nn.ReLU(inplace=True)
        self.primary = nn.Conv2d(32, 8 * 4, 5, 2)
        n_in = 8 * 6 * 6
        self.W = nn.Parameter(0.05 * torch.randn(n_in, classes, 8, 4))
        self.decoder = nn.Sequential(nn.Linear(classes * 8, 64), nn.ReLU(inplace=True), nn.Linear(64, 400))
        self.classes = classes
    def forward(self, x, y):
        h = self.relu(self.conv(x))
        p = self.primary(h)  # b, 32, 6, 6
        b = x.shape[0]
        u = squash(p.view(b, 8, 4, 6, 6).permute(0, 1, 3, 4, 2).reshape(b, -1, 4))
        uhat = torch.einsum("ncdk,bnk->bncd", self.W, u)
        logits = uhat.new_zeros(b, uhat.shape[1], self.classes)
        for it in range(3):
            c = logits.softmax(-1)
            pred = uhat if it == 2 else uhat.detach()
            v = squash((c.unsqueeze(-1) * pred).sum(1))
            if it < 2:
                logits = logits + (pred * v.unsqueeze(1)).sum(-1)
        length = v.norm(dim=-1)
        onehot = F.one_hot(y, self.classes).to(v.dtype)
        recon = torch.sigmoid(self.decoder((v * onehot.unsqueeze(-1)).flatten(1)))
        margin = onehot * F.relu(0.9 - length) ** 2 + 0.5 * (1 - onehot) * F.relu(length - 0.1) ** 2
        return margin.sum(1).mean() + 0.0005 * F.mse_loss(recon, x.flatten(1), reduction="sum") / b
def build_model():
    return CapsNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.rand(b, 1, 20, 20, generator=g), "y": torch.randint(0, 5, (b,), generator=g)}
