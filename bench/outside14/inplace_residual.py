"""A hand-written pre-LayerNorm transformer classifier over 16 tokens of d 32 whose residual updates are done in place on fresh tensors: the token embedding's output scaled by mul_(sqrt(d)) and given its learned position table with += (the embedding output being saved by nothing), then 3 blocks in which the attention branch's output (a fresh tensor from the output projection) is multiplied in place by a layer-scale parameter (mul_) and the block input added in place (add_), and the MLP branch is a sigmoid-gated linear unit computed with in-place ops (the gate's linear output through torch.sigmoid_, the value's linear output mul_'ed by it; no GELU) whose output gets layer-scaled with mul_ and the residual added with +=; the residual stream itself (the block input, saved by the LayerNorm) never modified in place; a final LayerNorm, mean pooling over tokens and a linear head to 6 classes; cross-entropy in loss_fn."""
import math
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 4
V, D, T, H = 128, 32, 16, 4
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.gate, self.val, self.out = nn.Linear(D, 64), nn.Linear(D, 64), nn.Linear(64, D)
        self.ls1, self.ls2 = nn.Parameter(torch.full((D,), 0.1)), nn.Parameter(torch.full((D,), 0.1))
    def attn(self, h):
        b, t, _ = h.shape
        q, k, v = self.qkv(h).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2) / math.sqrt(D // H)).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, D))
    def mlp(self, h):
        g = self.gate(h)
        torch.sigmoid_(g)
        u = self.val(h)
        u.mul_(g)
        return self.out(u)
    def forward(self, x):
        a = self.attn(self.n1(x))
        a.mul_(self.ls1).add_(x)
        m = self.mlp(self.n2(a))
        m.mul_(self.ls2)
        m += a
        return m
class InplaceNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(V, D), nn.Parameter(0.02 * torch.randn(T, D))
        self.blocks = nn.Sequential(Block(), Block(), Block())
        self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, 6)
    def forward(self, ids):
        x = self.emb(ids)
        x.mul_(math.sqrt(D))
        x += self.pos
        return self.head(self.norm(self.blocks(x)).mean(1))
def build_model():
    return InplaceNet()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, V, (b, T), generator=g), torch.randint(0, 6, (b,), generator=g)
def loss_fn(out, y):
    return F.cross_entropy(out, y)
