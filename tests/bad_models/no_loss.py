"""Bad: the model returns plain logits and the file defines no loss_fn."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, labels):
        return self.fc(x)


def build_model():
    return Net()


def example_batch(batch_size):
    return {"x": torch.randn(batch_size, 4), "labels": torch.randint(0, 3, (batch_size,))}
