"""split() of a transposed tensor: torch 1.13's functionalize turns it into
as_strided reads of the transpose's storage, which the runtime (dense
values, views copied) reads from a rebuilt storage (python/trainstep/
views.py); it exports and verifies (tests/python/test_seq_models.py)."""
import torch
import torch.nn as nn

import trainstep


class Halves(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        a, b = x.t().split(3, dim=0)
        return self.fc((a + b).t())


def build():
    m = Halves()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    return trainstep.TrainSpec(m, nn.functional.cross_entropy, opt,
                               (torch.randn(4, 6),), torch.randint(0, 2, (4,)))
