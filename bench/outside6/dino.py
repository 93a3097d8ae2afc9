"""DINO-like self-distillation: a student (conv backbone + projection head) and a teacher made by copy.deepcopy with requires_grad=False, the teacher updated in forward by an EMA of the student (lerp_ under torch.no_grad) and run under no_grad on two global 32x32 crops; the student also sees two local 16x16 crops (one module, two input shapes); the teacher's outputs centred by a buffer updated in forward, cross-entropy between sharpened softmaxes over every pair of different views."""
import copy
import torch, torch.nn as nn, torch.nn.functional as F
BATCH_SIZE = 8
class Net(nn.Module):
    def __init__(self, out_dim=64):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.GELU(), nn.Conv2d(16, 32, 3, 2, 1), nn.GELU(),
                                      nn.Conv2d(32, 64, 3, 2, 1), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 32))
        self.last = nn.Linear(32, out_dim, bias=False)
    def forward(self, x):
        return self.last(F.normalize(self.head(self.backbone(x)), dim=-1))
class DINO(nn.Module):
    def __init__(self, out_dim=64, momentum=0.996, t_student=0.1, t_teacher=0.04, center_momentum=0.9):
        super().__init__()
        self.student = Net(out_dim)
        self.teacher = copy.deepcopy(self.student)
        for p in self.teacher.parameters():
            p.requires_grad_(False)
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.m, self.ts, self.tt, self.cm = momentum, t_student, t_teacher, center_momentum
    def forward(self, global1, global2, local1, local2):
        with torch.no_grad():
            for ps, pt in zip(self.student.parameters(), self.teacher.parameters()):
                pt.lerp_(ps, 1 - self.m)
            t_out = [self.teacher(v) for v in (global1, global2)]
            t_prob = [F.softmax((t - self.center) / self.tt, dim=-1) for t in t_out]
        s_logp = [F.log_softmax(self.student(v) / self.ts, dim=-1) for v in (global1, global2, local1, local2)]
        loss, n = 0.0, 0
        for i, tp in enumerate(t_prob):
            for j, sl in enumerate(s_logp):
                if i != j:
                    loss = loss + (-tp * sl).sum(-1).mean()
                    n += 1
        with torch.no_grad():
            batch_center = torch.cat(t_out).mean(0, keepdim=True)
            self.center.mul_(self.cm).add_(batch_center, alpha=1 - self.cm)
        return loss / n
def build_model():
    return DINO()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"global1": torch.randn(b, 3, 32, 32, generator=g), "global2": torch.randn(b, 3, 32, 32, generator=g),
            "local1": torch.randn(b, 3, 16, 16, generator=g), "local2": torch.randn(b, 3, 16, 16, generator=g)}
