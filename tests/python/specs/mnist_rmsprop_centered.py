"""The seed's MNIST CNN with RMSprop(centered, momentum): square and
gradient running averages, momentum on g / avg.

lr=1e-4 and eps=1e-5 (torch's defaults 1e-2 / 1e-8): centered RMSprop's
first step is ~10 * lr * sign(g) per element, so at lr=1e-3 fc1's weights
(scale ~1e-2) move ~100% in 5 steps, and with eps=1e-8 near-zero gradients
get noise-sized sign steps. Measured in eager alone (gradients perturbed by
1e-7 of their scale): lr=1e-3/eps=1e-8 diverges to 0.9 of scale,
lr=1e-3/eps=1e-5 to 6e-2, lr=1e-4/eps=1e-5 to 4e-5. C++ vs eager with
these settings: 1.3e-5 of scale (fc2.weight momentum_buffer).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "mnist"))
import spec as mnist  # noqa: E402

import trainstep  # noqa: E402


def build():
    torch.manual_seed(5)
    model = mnist.Net()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-4, centered=True, momentum=0.9,
                              eps=1e-5)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="mnist_rmsprop_centered",
                               golden_steps=5)
