"""The activation modules users reach for, in one MLP (ACTS selects a
comma-separated subset, by name below): each forward and backward
against eager through verify."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

ACTS = {
    "leaky_relu": lambda: nn.LeakyReLU(0.1),
    "prelu": lambda: nn.PReLU(16),
    "elu": lambda: nn.ELU(0.7),
    "selu": nn.SELU,
    "celu": lambda: nn.CELU(1.3),
    "softplus": lambda: nn.Softplus(beta=2.0, threshold=5.0),
    "mish": nn.Mish,
    "silu": nn.SiLU,
    "hardtanh": lambda: nn.Hardtanh(-0.5, 0.5),
    "relu6": nn.ReLU6,
    "softsign": nn.Softsign,
    "tanhshrink": nn.Tanhshrink,
    "logsigmoid": nn.LogSigmoid,
    "hardsigmoid": nn.Hardsigmoid,
}


class Net(nn.Module):
    def __init__(self, names):
        super().__init__()
        self.inp = nn.Linear(10, 16)
        self.acts = nn.ModuleList([ACTS[n]() for n in names])
        self.mix = nn.ModuleList([nn.Linear(16, 16) for _ in names])
        self.out = nn.Linear(16, 3)

    def forward(self, x):
        h = self.inp(x)
        for act, mix in zip(self.acts, self.mix):
            h = mix(act(h))
        return self.out(h)


def build():
    torch.manual_seed(0)
    names = [n for n in os.environ.get("ACTS", ",".join(ACTS)).split(",") if n]
    model = Net(names)
    x = torch.randn(16, 10) * 2
    y = torch.randint(0, 3, (16,))
    return trainstep.TrainSpec(model, F.cross_entropy, torch.optim.SGD(model.parameters(), lr=0.05),
                               (x,), y, name="activations")
