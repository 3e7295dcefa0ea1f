"""Writes through several index tensors, as sparse-to-dense code does: a
learned token per (row, col) cell written into a grid (`grid[:, rows,
cols] = tokens`, aten.index_put with two index tensors) and a histogram
of features added at (row, col) pairs with repeats (`index_put(...,
accumulate=True)`), then a small conv head."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class ScatterGrid(nn.Module):
    def __init__(self, h=5, w=6, d=4, classes=3):
        super().__init__()
        self.h, self.w, self.d = h, w, d
        self.register_buffer("rows", torch.tensor([0, 1, 3, 4, -1]))
        self.register_buffer("cols", torch.tensor([2, 5, 0, 1, 3]))
        self.tokens = nn.Parameter(torch.randn(5, d) * 0.5)
        self.proj = nn.Linear(8, d)
        self.head = nn.Conv2d(d, classes, 3, padding=1)

    def forward(self, feats, at):
        b = feats.shape[0]
        grid = feats.new_zeros(b, self.h, self.w, self.d)
        grid[:, self.rows, self.cols] = self.tokens          # index_put, 2 indices
        # Each sample's feature vector added at its cells; repeats add up.
        flat = grid.reshape(b * self.h, self.w, self.d)
        r = (at[:, :, 0] + torch.arange(b).unsqueeze(1) * self.h).reshape(-1)
        c = at[:, :, 1].reshape(-1)
        v = torch.tanh(self.proj(feats)).unsqueeze(1).expand(b, at.shape[1], self.d)
        flat = flat.index_put((r, c), v.reshape(-1, self.d), accumulate=True)
        grid = flat.reshape(b, self.h, self.w, self.d).permute(0, 3, 1, 2)
        return self.head(grid).mean(dim=(2, 3))


def build():
    torch.manual_seed(0)
    model = ScatterGrid()
    b = 6
    feats = torch.randn(b, 8)
    at = torch.stack([torch.randint(0, 5, (b, 4)), torch.randint(0, 6, (b, 4))], dim=2)
    at[:, 1] = at[:, 0]  # a repeated cell per sample
    y = torch.randint(0, 3, (b,))
    return trainstep.TrainSpec(model, F.cross_entropy,
                               torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                               (feats, at), y, name="scatter_grid")
