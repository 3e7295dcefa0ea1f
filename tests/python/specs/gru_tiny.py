"""A tiny 2-layer nn.GRU language model with inter-layer dropout: checks
that the RNN capture (fresh flat weights, layered dropout) is not
LSTM-specific. SGD with momentum; batch 4, 8 steps of context."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class TinyGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(256, 16)
        self.gru = nn.GRU(16, 24, num_layers=2, dropout=0.3, batch_first=True)
        self.head = nn.Linear(24, 256)

    def forward(self, idx):
        y, _ = self.gru(self.emb(idx))
        return self.head(y)


def lm_loss(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def build():
    torch.manual_seed(3)
    model = TinyGRU()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    x = torch.randint(0, 256, (4, 9))
    return trainstep.TrainSpec(model, lm_loss, opt, (x[:, :-1],), x[:, 1:].contiguous(),
                               name="gru_tiny", golden_steps=5)
