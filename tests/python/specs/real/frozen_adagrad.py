"""Transfer learning as tutorials write it: a small CNN whose first block is
frozen (requires_grad False), the rest in two Adagrad param groups with
their own learning rates. Several steps of Adagrad's per-element scaling
and ReLU/max-pool ties make eager PyTorch's own spread on the final state
larger than a fixed 1e-4; the calibrated tolerance absorbs that, and the
first step's update is still checked tightly."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 7 * 7, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x):
        x = self.features(x)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(x)


def build():
    torch.manual_seed(0)
    model = Net()
    for p in model.features.parameters():
        p.requires_grad = False
    opt = torch.optim.Adagrad([{"params": model.conv2.parameters(), "lr": 0.05},
                               {"params": model.head.parameters()}], lr=0.01)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    return trainstep.TrainSpec(model, F.cross_entropy, opt, (x,), y, name="frozen_adagrad",
                               golden_steps=8)
