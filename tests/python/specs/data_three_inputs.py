"""A BERT-shaped classifier taking three positional inputs (token ids, an
attention mask and token types) and one label, with SGD momentum, batch 8:
what `train --data npz:` feeds field by field (tests/python/test_data_sources.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

VOCAB, TYPES, SEQ, CLASSES, BATCH = 30, 2, 12, 3, 8


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, 16)
        self.typ = nn.Embedding(TYPES, 16)
        self.mix = nn.Linear(16, 16)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, ids, mask, types):
        h = torch.tanh(self.mix(self.tok(ids) + self.typ(types)))
        m = mask.to(h.dtype).unsqueeze(-1)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.head(pooled)


def batch(n, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)
    mask = (torch.rand(n, SEQ, generator=g) > 0.2).long()
    types = torch.randint(0, TYPES, (n, SEQ), generator=g)
    label = torch.randint(0, CLASSES, (n,), generator=g)
    return ids, mask, types, label


def build():
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    ids, mask, types, label = batch(BATCH, 1)
    return trainstep.TrainSpec(model, F.cross_entropy, opt, (ids, mask, types), label,
                               name="data_three_inputs", golden_steps=2)
