"""A sequence-first transformer LM that caches what it computes from the
sequence length in plain attributes, as pytorch/examples'
word_language_model TransformerModel does with its mask (written here):
`self.src_mask` starts as None and forward fills it on the first call, and
`self._positions` does not exist until forward makes it (hasattr). Both are
caches, recomputed by every compiled step (python/trainstep/caches.py).

CARRY=1 adds what is not a cache: `self.memory`, the previous batch's mean
activation added to the next batch's, state carried from batch to batch
that the export refuses. CARRY=write only writes it (as a model keeps an
attention map to plot), which changes nothing: that exports and verifies."""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

NTOKEN, SEQ, BATCH, D = 64, 12, 4, 16


class CachingLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(NTOKEN, D)
        self.position = nn.Embedding(SEQ, D)
        layer = nn.TransformerEncoderLayer(D, 2, 32, 0.1)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.decoder = nn.Linear(D, NTOKEN)
        self.src_mask = None
        self.carry = os.environ.get("CARRY")
        self.memory = None

    def forward(self, src):
        n = src.size(0)
        if self.src_mask is None or self.src_mask.size(0) != n:
            self.src_mask = torch.log(torch.tril(torch.ones(n, n)))
        if not hasattr(self, "_positions") or self._positions.size(0) != n:
            self._positions = torch.arange(n).unsqueeze(1)
        x = self.embed(src) * math.sqrt(D) + self.position(self._positions)
        if self.carry:
            if self.memory is not None and self.carry == "1":
                x = x + self.memory
            self.memory = x.detach().mean(dim=(0, 1))
        return F.log_softmax(self.decoder(self.encoder(x, mask=self.src_mask)), dim=-1)


def loss_fn(output, target):
    return F.nll_loss(output.view(-1, NTOKEN), target.reshape(-1))


def build():
    torch.manual_seed(0)
    model = CachingLM()
    data = torch.randint(0, NTOKEN, (SEQ + 1, BATCH))
    return trainstep.TrainSpec(model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.5),
                               (data[:-1],), data[1:], name="cached_mask", batch_dims=1)
