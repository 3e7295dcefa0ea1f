"""A model that returns its own loss, as Hugging Face models do with
labels=...: forward(x, labels) gives {"loss": 0-d, "logits": [batch, 10]},
and the spec's loss_fn only picks it out. The eval step then reports the
batch's loss (no per-sample split).

$ML=aux: one input and a target, so `trainstep eval --data` feeds it; the
model returns a 0-d auxiliary term beside its logits (a regulariser), which
the loss adds: no per-sample split either."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x, labels):
        logits = self.fc2(F.relu(self.fc1(x.flatten(1))))
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


class WithAux(Classifier):
    def forward(self, x):
        logits = self.fc2(F.relu(self.fc1(x.flatten(1))))
        return {"logits": logits, "aux": logits.pow(2).mean()}


def aux_loss(out, y):
    return F.cross_entropy(out["logits"], y) + 0.01 * out["aux"]


def build():
    torch.manual_seed(0)
    if os.environ.get("ML") == "aux":
        model = WithAux()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        return trainstep.TrainSpec(model, aux_loss, opt, (torch.randn(64, 1, 28, 28),),
                                   torch.randint(0, 10, (64,)), name="model_aux")
    model = Classifier()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    return trainstep.TrainSpec(model, lambda out, y: out["loss"], opt, (x, y), y,
                               name="model_loss")
