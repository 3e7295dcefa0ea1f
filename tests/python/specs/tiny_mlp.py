"""A two-layer MLP with MSE and SGD momentum, batch 4: the smallest spec
that exports under torch 1.13 and 2.x alike, for tests of the exporter's
packaging rather than its capture (tests/python/test_package.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


def build():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return trainstep.TrainSpec(model, F.mse_loss, opt, (torch.randn(4, 4),), torch.randn(4, 2),
                               name="tiny_mlp", golden_steps=2)
