"""Bad: the batch dict carries a setting (an HF model's return_loss=True), not only tensors."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, x, return_loss=False):
        y = self.lin(x)
        return y.square().mean() if return_loss else y


def build_model():
    return Net()


def example_batch(batch_size):
    return {"x": torch.randn(batch_size, 4), "return_loss": True}
