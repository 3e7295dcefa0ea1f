"""nn.TransformerEncoderLayer (batch_first, dropout on) as torch ships it:
on 2.x its self-attention runs through F.scaled_dot_product_attention,
with the attention dropout drawn inside SDPA; a key padding mask."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Encoder(nn.Module):
    def __init__(self, vocab=30, dim=32, heads=4, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=64, dropout=0.1,
                                                batch_first=True)
        self.out = nn.Linear(dim, classes)

    def forward(self, tokens):
        pad = tokens == 0
        h = self.layer(self.emb(tokens), src_key_padding_mask=pad)
        return self.out(h.mean(dim=1))


def build():
    torch.manual_seed(0)
    model = Encoder()
    # SGD, not Adam: the key part of in_proj_bias gets only rounding noise as
    # its gradient (softmax ignores a per-row constant), which Adam would
    # scale up to lr-sized steps of either sign, in eager as in C++.
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(1, 30, (8, 10), generator=g)
    tokens[:, 7:] = 0  # padding at the end of every row
    target = torch.randint(0, 5, (8,), generator=g)
    return trainstep.TrainSpec(model, F.cross_entropy, opt, (tokens,), target, name="mha_encoder",
                               golden_steps=4)
