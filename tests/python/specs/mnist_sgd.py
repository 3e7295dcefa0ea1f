"""The seed's MNIST CNN with SGD(momentum 0.9, nesterov, weight_decay 1e-4)."""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "mnist"))
import spec as mnist  # noqa: E402

import trainstep  # noqa: E402


def build():
    torch.manual_seed(2)
    model = mnist.Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)
    x = torch.randn(64, 1, 28, 28)
    y = torch.randint(0, 10, (64,))
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="mnist_sgd", golden_steps=5)
