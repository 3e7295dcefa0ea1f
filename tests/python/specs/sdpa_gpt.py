"""A nanoGPT-style causal self-attention LM calling
F.scaled_dot_product_attention directly (torch >= 2.0), as nanoGPT does:
is_causal, dropout_p on the attention weights in training, or an explicit
attn_mask (SDPA_MASK=bool|float) instead of is_causal."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

MASK = os.environ.get("SDPA_MASK", "")


class Attention(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        # No qkv bias: the key bias gets only rounding noise as its gradient
        # (softmax ignores a per-row constant), which AdamW turns into
        # lr-sized steps of either sign, in eager as in C++.
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class TinyGPT(nn.Module):
    def __init__(self, vocab=40, dim=32, heads=4, block=12, dropout=0.2):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block, dim)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, dropout)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as nanoGPT does
        T = block
        if MASK == "bool":
            self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril(), persistent=False)
        elif MASK == "float":
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            self.register_buffer("mask", torch.zeros(T, T).masked_fill(~causal, float("-inf")),
                                 persistent=False)
        else:
            self.mask = None

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        x = x + self.attn(self.ln1(x), self.mask)
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def loss_fn(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def build():
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 40, (6, 12), generator=g)
    target = torch.randint(0, 40, (6, 12), generator=g)
    return trainstep.TrainSpec(model, loss_fn, opt, (idx,), target, name="sdpa_gpt" + MASK,
                               golden_steps=4)
