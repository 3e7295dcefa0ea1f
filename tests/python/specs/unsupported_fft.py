"""A model using torch.fft.rfft, which the runtime does not support: the
export must fail naming the op."""
import torch
import torch.nn as nn

import trainstep


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(9, 2)

    def forward(self, x):
        return self.fc(torch.fft.rfft(x).abs())


def build():
    m = Spectral()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    return trainstep.TrainSpec(m, nn.functional.cross_entropy, opt,
                               (torch.randn(4, 16),), torch.randint(0, 2, (4,)))
