"""Swin Transformer's shifted-window mask pattern (written here): forward
builds a region map by writing Python numbers into slices of a fresh
tensor, `mask[h0:h1, w0:w1] = count`, and turns it into an additive
attention mask. Tracing lifts each number as a 0-d constant, which the
capture takes as the value it is."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self, d=8, size=6, shift=2):
        super().__init__()
        self.size, self.shift = size, shift
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, 4)

    def forward(self, x):
        n = self.size
        region = x.new_zeros((n,))
        count = 0
        for s in (slice(0, n - 2 * self.shift), slice(n - 2 * self.shift, n - self.shift),
                  slice(n - self.shift, None)):
            region[s] = count
            count += 1
        mask = (region.unsqueeze(0) - region.unsqueeze(1)) != 0
        mask = mask.float().masked_fill(mask, -100.0)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = F.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5 + mask, dim=-1)
        return self.out((att @ v).mean(dim=1))


def build():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 6, 8)
    y = torch.randint(0, 4, (4,))
    return trainstep.TrainSpec(model, F.cross_entropy, torch.optim.Adam(model.parameters(), lr=1e-2),
                               (x,), y, name="window_mask")
