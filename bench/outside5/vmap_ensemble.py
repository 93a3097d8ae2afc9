"""A deep ensemble of five small MLPs run at once with torch.func: the members' parameters stacked into nn.Parameters (stack_module_state), a meta-device template called through functional_call under torch.vmap in forward; loss = the members' mean cross-entropy."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.func import functional_call, stack_module_state
BATCH_SIZE = 8
def member():
    return nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 4))
class Ensemble(nn.Module):
    def __init__(self, k=5):
        super().__init__()
        params, _ = stack_module_state([member() for _ in range(k)])
        self.names = list(params)
        self.stacked = nn.ParameterList(nn.Parameter(p) for p in params.values())
        self.base = [member().to("meta")]  # a stateless template, in a list: not a submodule
    def forward(self, x, y):
        params = dict(zip(self.names, self.stacked))
        def one(p, xx):
            return functional_call(self.base[0], p, (xx,))
        logits = torch.vmap(one, in_dims=(0, None))(params, x)  # k, b, 4
        k = logits.shape[0]
        return F.cross_entropy(logits.reshape(-1, 4), y.repeat(k))
def build_model():
    return Ensemble()
def example_batch(b):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(b, 20, generator=g), "y": torch.randint(0, 4, (b,), generator=g)}
