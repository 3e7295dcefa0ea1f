"""A model written as transformers writes its attention: it starts a cache
with a tensor literal made inside forward (`torch.tensor([])`), and runs a
data-dependent check only when no tracer is compiling it
(torch.compiler.is_compiling(), where this torch has it)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


def _compiling():
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and compiler.is_compiling()


class CachedAttention(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, 4)

    def forward(self, x, mask):
        if not _compiling() and not bool(mask.any()):  # eager only: a value read
            raise ValueError("every position is masked")
        keys = torch.tensor([], dtype=x.dtype)  # the cache, empty at first
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        keys = torch.cat([keys.reshape(*k.shape[:-2], 0, k.shape[-1]), k], dim=-2)
        scale = torch.tensor([0.5, 0.25, 0.125, 0.125]).sum() * 0.25  # a literal of 4 values
        att = (q @ keys.transpose(-1, -2)) * scale
        att = att.masked_fill(mask[:, None, :] == 0, -1e9).softmax(-1)
        return self.out((att @ v).mean(1))


def build():
    torch.manual_seed(0)
    model = CachedAttention()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(4, 6, 16)
    mask = torch.ones(4, 6)
    mask[1, 4:] = 0
    return trainstep.TrainSpec(model, F.cross_entropy, opt, (x, mask), torch.randint(0, 4, (4,)),
                               name="cache_model")
