"""The seed's MNIST CNN with Adagrad(lr_decay, weight_decay), dropout on.

initial_accumulator_value=0.1: with 0, Adagrad's first step is
lr * g / (|g| + 1e-10), an lr-sized step for every element however small
its gradient, so elements at the float32 summation-noise floor (where oneDNN
and PyTorch convolutions differ) move by +-lr in eager PyTorch itself.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "mnist"))
import spec as mnist  # noqa: E402

import trainstep  # noqa: E402


def build():
    torch.manual_seed(13)
    model = mnist.Net()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.01, lr_decay=1e-3, weight_decay=1e-3,
                              initial_accumulator_value=0.1)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="mnist_adagrad",
                               golden_steps=5)
