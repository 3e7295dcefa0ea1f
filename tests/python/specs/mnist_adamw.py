"""The seed's MNIST CNN with AdamW(weight_decay 0.05), dropout on.

eps=1e-5 for the reason given in mnist_adam_amsgrad.py: with torch's 1e-8,
gradient elements at the float32 summation-noise floor take lr-sized steps
whose sign is noise, in eager PyTorch itself.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "mnist"))
import spec as mnist  # noqa: E402

import trainstep  # noqa: E402


def build():
    torch.manual_seed(12)
    model = mnist.Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=5e-2, eps=1e-5)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="mnist_adamw",
                               golden_steps=5)
