"""Models that return a structure, not one tensor: a dict, a namedtuple and
a dataclass (OUTPUT selects), each with a nested tuple and a non-tensor
leaf; the loss reads the fields by name."""
import dataclasses
import os
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Heads(NamedTuple):
    logits: torch.Tensor
    aux: tuple


@dataclasses.dataclass
class Result:
    logits: torch.Tensor
    aux: tuple
    note: str = "dataclass"


class TwoHeads(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.body = nn.Sequential(nn.Linear(12, 32), nn.Tanh())
        self.cls = nn.Linear(32, 5)
        self.reg = nn.Linear(32, 2)

    def forward(self, x):
        h = self.body(x)
        logits, aux = self.cls(h), (self.reg(h), h.mean(dim=1))
        if self.kind == "dict":
            return {"logits": logits, "aux": aux, "scale": 0.5}
        if self.kind == "namedtuple":
            return Heads(logits, aux)
        return Result(logits, aux)


def loss_fn(out, target):
    get = (lambda k: out[k]) if isinstance(out, dict) else (lambda k: getattr(out, k))
    reg, mean = get("aux")
    return F.cross_entropy(get("logits"), target) + 0.1 * (reg ** 2).mean() + 0.1 * mean.pow(2).mean()


def build():
    torch.manual_seed(0)
    kind = os.environ.get("OUTPUT", "dict")
    model = TwoHeads(kind)
    x = torch.randn(8, 12)
    y = torch.randint(0, 5, (8,))
    return trainstep.TrainSpec(model, loss_fn, torch.optim.Adam(model.parameters(), lr=1e-2),
                               (x,), y, name=f"structured_{kind}")
