"""A token model whose loss skips padded positions with ignore_index=-1, as
minGPT writes it: F.cross_entropy(logits.view(-1, V), targets.view(-1),
ignore_index=-1). $II=nll: F.nll_loss on log-probabilities with
ignore_index=-1; $II=smooth: cross_entropy with class weights and label
smoothing as well. A quarter of the example's targets are -1."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

V = 20


class TokenModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, 16)
        self.head = nn.Linear(16, V)

    def forward(self, idx):
        return self.head(torch.tanh(self.embed(idx)))


def loss_fn(logits, targets):
    kind = os.environ.get("II", "ce")
    flat, t = logits.view(-1, logits.size(-1)), targets.view(-1)
    if kind == "nll":
        return F.nll_loss(flat.log_softmax(-1), t, ignore_index=-1)
    if kind == "smooth":
        weight = 0.5 + torch.arange(V) / (V - 1.0)  # made in the step: a constant of it
        return F.cross_entropy(flat, t, weight=weight, ignore_index=-1, label_smoothing=0.1)
    return F.cross_entropy(flat, t, ignore_index=-1)


def build():
    torch.manual_seed(0)
    model = TokenModel()
    x, y = torch.randint(0, V, (4, 6)), torch.randint(0, V, (4, 6))
    y[:, :2] = -1  # padding, as minGPT's datasets mark it (and eval splits per sample)
    y[0, 3] = -1
    return trainstep.TrainSpec(model, loss_fn, torch.optim.AdamW(model.parameters(), lr=1e-2),
                               (x,), y, name="ignore_index_lm")
