"""Stochastic depth as torchvision's EfficientNet and ConvNeXt write it
(written here): each residual branch is kept per sample with probability
1 - p by `torch.empty(...).bernoulli_(survival)` and rescaled; plus input
noise from torch.randn, and a nn.GroupNorm. All draws come from the step's
Philox stream, in eager and in C++ alike."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


def stochastic_depth(x, p, training):
    if not training or p == 0.0:
        return x
    survival = 1.0 - p
    noise = torch.empty([x.shape[0]] + [1] * (x.dim() - 1), dtype=x.dtype).bernoulli_(survival)
    return x * noise.div_(survival)


class Block(nn.Module):
    def __init__(self, c, p):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.norm = nn.GroupNorm(2, c)
        self.p = p

    def forward(self, x):
        return x + stochastic_depth(F.gelu(self.norm(self.conv(x))), self.p, self.training)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, padding=1)
        self.blocks = nn.Sequential(Block(8, 0.2), Block(8, 0.4))
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        if self.training:
            x = x + 0.01 * torch.randn(x.shape)
        x = self.blocks(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))


def build():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(8, 1, 10, 10)
    y = torch.randint(0, 10, (8,))
    return trainstep.TrainSpec(model, F.cross_entropy, torch.optim.AdamW(model.parameters(), lr=1e-2),
                               (x,), y, name="stochastic_depth")
