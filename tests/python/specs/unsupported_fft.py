"""A model using torch.fft.rfft, which the runtime does not support: the
export must fail naming the op, its node count, the module that called it
and this file's line (tests/python/test_export.py)."""
import torch
import torch.nn as nn

import trainstep


class SpectralFeatures(nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x).abs()


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = SpectralFeatures()
        self.fc = nn.Linear(9, 2)

    def forward(self, x):
        return self.fc(self.features(x))


def build():
    m = Spectral()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    return trainstep.TrainSpec(m, nn.functional.cross_entropy, opt,
                               (torch.randn(4, 16),), torch.randint(0, 2, (4,)))
