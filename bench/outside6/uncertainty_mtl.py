"""Multi-task learning with homoscedastic-uncertainty loss weighting (Kendall et al.): a shared MLP trunk, an nn.ModuleDict of three heads routed by task-name keys fixed in __init__, and an nn.Parameter of per-task log-variances read only in the loss (sum of exp(-s) * L + s)."""
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class UncertaintyMTL(nn.Module):
    def __init__(self, d_in=40, d=96):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(d_in, d), nn.SiLU(), nn.Linear(d, d), nn.SiLU())
        self.tasks = ("cls", "reg", "tag")
        self.heads = nn.ModuleDict({"cls": nn.Linear(d, 6), "reg": nn.Sequential(nn.Linear(d, 32), nn.SiLU(), nn.Linear(32, 2)),
                                    "tag": nn.Linear(d, 5)})
        self.log_vars = nn.Parameter(torch.zeros(len(self.tasks)))
    def task_loss(self, task, out, target):
        if task == "cls":
            return F.cross_entropy(out, target)
        if task == "reg":
            return F.mse_loss(out, target)
        return F.binary_cross_entropy_with_logits(out, target)
    def forward(self, x, cls, reg, tag):
        h = self.trunk(x)
        targets = {"cls": cls, "reg": reg, "tag": tag}
        loss = 0.0
        for i, task in enumerate(self.tasks):
            l = self.task_loss(task, self.heads[task](h), targets[task])
            loss = loss + torch.exp(-self.log_vars[i]) * l + self.log_vars[i]
        return loss
def build_model():
    return UncertaintyMTL()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 40, generator=g), "cls": torch.randint(0, 6, (b,), generator=g),
            "reg": torch.randn(b, 2, generator=g), "tag": (torch.rand(b, 5, generator=g) > 0.5).float()}
