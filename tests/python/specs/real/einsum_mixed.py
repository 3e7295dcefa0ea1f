"""einsum, as attention code writes it (torch decomposes it into bmm and
permutes), and a float32 model with float64 parameters, which follow
torch's promotion: a 0-d float64 temperature leaves float32 logits
float32; a float64 per-feature scale makes its product float64."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class EinsumNet(nn.Module):
    def __init__(self, d=8, heads=2, classes=5):
        super().__init__()
        self.h = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.w = nn.Parameter(torch.randn(d, d) / d ** 0.5)
        self.scale = nn.Parameter(torch.ones(d, dtype=torch.float64))
        self.temperature = nn.Parameter(torch.tensor(1.5, dtype=torch.float64))
        self.head = nn.Linear(d, classes)

    def forward(self, x):                                    # (B, T, D) float32
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.h, d // self.h).unbind(2)
        att = torch.einsum("bqhd,bkhd->bhqk", q, k) / (d // self.h) ** 0.5
        ctx = torch.einsum("bhqk,bkhd->bqhd", att.softmax(-1), v).reshape(b, t, d)
        h = torch.einsum("btd,de->be", ctx, self.w) / t      # sum over t and d
        h64 = h * self.scale                                 # float32 x float64[D] -> float64
        logits = self.head(h64.float()) / self.temperature   # 0-d float64 keeps float32
        assert logits.dtype == torch.float32 and h64.dtype == torch.float64
        return logits, h64


def loss_fn(out, y):
    logits, h64 = out
    return F.cross_entropy(logits, y) + 1e-3 * h64.pow(2).mean()


def build():
    torch.manual_seed(0)
    model = EinsumNet()
    x = torch.randn(6, 4, 8)
    y = torch.randint(0, 5, (6,))
    return trainstep.TrainSpec(model, loss_fn, torch.optim.Adam(model.parameters(), lr=1e-2),
                               (x,), y, name="einsum_mixed")
