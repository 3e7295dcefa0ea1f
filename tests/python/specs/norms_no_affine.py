"""Batch norm without affine parameters and instance norm (affine=False,
no running stats): under autocast their captured batch norms have no
per-channel input, so torch keeps the saves in bfloat16 (test_bf16.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16, affine=False)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.inorm = nn.InstanceNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.c1(x)))
        x = F.relu(self.inorm(self.c2(x)))
        return self.fc(x.mean((2, 3)))


def build():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return trainstep.TrainSpec(model, F.cross_entropy, opt, (torch.randn(8, 3, 16, 16),),
                               torch.randint(0, 10, (8,)))
