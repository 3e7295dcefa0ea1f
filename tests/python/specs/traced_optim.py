"""A small CNN whose optimizer is traced from its own step(), chosen by
$TS_OPTIM: a torch.optim class name with its keyword arguments
("NAdam:lr=0.01"), or one of user_optimizers.py's ("SignMomentum",
"TwoRules", "SignMomentum:wrong=True"). Fashion-MNIST-shaped: 1x28x28 in, 10 classes.
$TS_OPTIM_CAPTURE sets TrainSpec.optimizer_capture."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import user_optimizers  # noqa: E402

import trainstep  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, stride=2)
        self.fc1 = nn.Linear(4 * 6 * 6, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def _kwargs(text):
    out = {}
    for item in filter(None, text.split(",")):
        k, v = item.split("=")
        out[k] = eval(v, {})  # numbers and tuples from the test's own string
    return out


def make_optimizer(model, spec):
    name, _, kw = spec.partition(":")
    kw = _kwargs(kw)
    if name == "SignMomentum":
        return user_optimizers.SignMomentum(model.parameters(), lr=2e-3, weight_decay=0.1, **kw)
    if name == "TwoRules":
        return user_optimizers.TwoRules([
            {"params": [model.conv.weight, model.conv.bias, model.fc1.weight], "lr": 2e-3},
            {"params": [model.fc1.bias, model.fc2.weight, model.fc2.bias], "rule": "momentum",
             "lr": 0.05}])
    if name in ("Muon", "MuonBf16"):  # matrices and kernels by Muon, the rest by momentum
        mats = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        return getattr(user_optimizers, name)([dict(params=mats), dict(params=rest, use_muon=False,
                                                                       lr=0.01)], weight_decay=0.01)
    if hasattr(user_optimizers, name):
        return getattr(user_optimizers, name)(model.parameters(), **kw)
    return getattr(torch.optim, name)(model.parameters(), **kw)


def build():
    torch.manual_seed(5)
    model = Net()
    opt = make_optimizer(model, os.environ.get("TS_OPTIM", "SignMomentum"))
    x = torch.randn(8, 1, 28, 28)
    y = torch.randint(0, 10, (8,))
    return trainstep.TrainSpec(model, F.cross_entropy, opt, (x,), y, name="traced_optim",
                               golden_steps=4,
                               optimizer_capture=os.environ.get("TS_OPTIM_CAPTURE", "auto"))
