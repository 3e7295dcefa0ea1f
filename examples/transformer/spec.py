"""A small decoder-only (GPT-style) character transformer: token and position
embeddings, pre-LayerNorm blocks of causal multi-head self-attention and a
GELU MLP, dropout, and an output layer tied to the token embedding. Bytes are
tokens (vocab 256); trained with cross-entropy and AdamW on
`--data fortunes` (Debian's fortune cookies)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

VOCAB = 256


class Attention(nn.Module):
    def __init__(self, d, heads, p):
        super().__init__()
        self.heads = heads
        # No bias: a key bias adds the same q.b to every score of a row, which
        # softmax ignores, so its gradient is rounding noise that Adam would
        # scale up to lr-sized steps of random sign.
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d)
        self.attn_drop = nn.Dropout(p)
        self.resid_drop = nn.Dropout(p)

    def forward(self, x):
        B, T, C = x.shape
        h = self.heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // h))
        i = torch.arange(T, device=x.device)
        future = i.unsqueeze(0) > i.unsqueeze(1)  # [T, T]: key after query
        att = att.masked_fill(future, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, d, heads, p):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, p)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(p))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CharTransformer(nn.Module):
    def __init__(self, block=64, d=128, heads=4, layers=2, p=0.1):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, d)
        self.pos_emb = nn.Embedding(block, d)
        self.drop = nn.Dropout(p)
        self.blocks = nn.Sequential(*[Block(d, heads, p) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.tok_emb.weight  # tied: one parameter, two uses
        # GPT-2's initialisation: N(0, 0.02) weights, zero biases (nn.Embedding's
        # N(0, 1) would give the tied output layer logits of size ~sqrt(d)).
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx):
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        return self.head(self.ln_f(self.blocks(x)))


def lm_loss(logits, target):
    """Mean cross-entropy over every predicted character."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def build(batch_size=32, seed=1, block=64):
    torch.manual_seed(seed)
    model = CharTransformer(block=block)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, eps=1e-5)
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, VOCAB, (batch_size, block + 1), generator=g)
    return trainstep.TrainSpec(model, lm_loss, optimizer, (x[:, :-1],), x[:, 1:].contiguous(),
                               name="char_transformer")
