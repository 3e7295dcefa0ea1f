"""A next-token model on (batch, block) windows of a token file, with Adam,
batch 8, block 6, vocabulary 50; no dropout, so eager replays it exactly
(tests/python/test_data_sources.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

VOCAB, BLOCK, BATCH = 50, 6, 8


class TokenLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 24)
        self.mix = nn.Linear(24, 24)
        self.out = nn.Linear(24, VOCAB)

    def forward(self, x):
        return self.out(torch.relu(self.mix(self.emb(x))))


def lm_loss(logits, y):
    return F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))


def build(batch=BATCH, name="data_token_lm", grads=False):
    torch.manual_seed(0)
    model = TokenLM()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, VOCAB, (batch, BLOCK), generator=g)
    y = torch.randint(0, VOCAB, (batch, BLOCK), generator=g)
    return trainstep.TrainSpec(model, lm_loss, opt, (x,), y, name=name, golden_steps=2,
                               export_grads=grads)
