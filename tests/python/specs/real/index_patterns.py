"""Indexing beyond adjacent dims: a gather through index tensors separated
by a slice (`h[:, rows, :, cols]`: torch puts the index dims first; its
backward writes through them), bool-mask writes whose values do not depend
on the mask's count (`g[mask] = 0.0`, index_put(..., accumulate=True)) from
registered bool buffers, a write `g[rows, :, cols] = v`, and a mask
after a slice, `g[:, tmask] = v`."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

B, S, T, D, CLASSES = 4, 5, 3, 6, 3


class IndexPatterns(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D, S * T * D)
        self.register_buffer("rows", torch.tensor([0, 2, -1, 2]))
        self.register_buffer("cols", torch.tensor([1, -1, 0, 3]))
        self.register_buffer("mask", torch.rand(S, T) > 0.5)
        self.register_buffer("bump", torch.rand(S, T) > 0.5)
        self.register_buffer("shift", torch.randn(D, 1))
        self.head = nn.Linear(4 * T + S * T * D, CLASSES)
        self.register_buffer("tmask", torch.tensor([True, False, True]))  # over T

    def forward(self, x):
        b = x.shape[0]
        h = torch.tanh(self.proj(x)).reshape(b, S, T, D)
        # Index dims first: (4, B, T); its backward is a non-adjacent index_put.
        picked = h[:, self.rows, :, self.cols]
        g = h.permute(1, 2, 3, 0).clone()                   # (S, T, D, B)
        g[self.mask] = 0.0                                  # a bool mask on (S, T)
        # += per D; the values take no gradient (theirs would be g.grad[mask]).
        g = g.index_put((self.bump,), self.shift, accumulate=True)
        # Index dims first again: values (4, T, B); 1.13 writes it through
        # patches.setitem.
        g[self.rows, :, self.cols] = picked.permute(0, 2, 1) * 2
        # A mask after a slice, values per (D, B): 1.13 writes it through
        # patches.setitem as a where().
        g[:, self.tmask] = 0.5 * x.t()
        return self.head(torch.cat([picked.permute(1, 0, 2).reshape(b, -1),
                                    g.permute(3, 0, 1, 2).reshape(b, -1)], dim=1))


def build():
    torch.manual_seed(0)
    model = IndexPatterns()
    x = torch.randn(B, D)
    y = torch.randint(0, CLASSES, (B,))
    return trainstep.TrainSpec(model, F.cross_entropy, torch.optim.SGD(model.parameters(), lr=0.1),
                               (x,), y, name="index_patterns", golden_steps=2)
