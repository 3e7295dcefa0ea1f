"""SGD with dampening: the first step must use the raw gradient as the
momentum buffer (torch's rule), not a dampened zero buffer."""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "mnist"))
import spec as mnist  # noqa: E402

import trainstep  # noqa: E402


def build():
    torch.manual_seed(3)
    model = mnist.Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.8, dampening=0.3)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="mnist_sgd_damp",
                               golden_steps=5)
