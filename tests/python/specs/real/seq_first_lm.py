"""A sequence-first transformer language model in the manner of
pytorch/examples' word_language_model TransformerModel (written here):
(seq, batch) token batches, sinusoidal positions, nn.TransformerEncoder
with batch_first=False and a causal mask, log-softmax over the vocabulary.
The target is (seq, batch) too and the loss flattens both, as the
example's training loop does. The batch (8) is on dim 1 of the input, the
target and the output: declared (batch_dims=1), since every dim 0 is the
sequence length, which the example batch cannot tell from a batch."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

NTOKEN, SEQ, BATCH = 256, 16, 8  # bytes: the runtime's text datasets


class PositionalEncoding(nn.Module):
    def __init__(self, d, dropout=0.1, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(max_len, 1, d)
        pe[:, 0, 0::2] = torch.sin(pos * div)
        pe[:, 0, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0)])


class TransformerLM(nn.Module):
    def __init__(self, ntoken=NTOKEN, d=16, heads=2, hidden=32, layers=2, dropout=0.1):
        super().__init__()
        self.pos = PositionalEncoding(d, dropout)
        layer = nn.TransformerEncoderLayer(d, heads, hidden, dropout)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.embed = nn.Embedding(ntoken, d)
        self.decoder = nn.Linear(d, ntoken)
        self.d = d

    def forward(self, src):
        n = src.size(0)
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        x = self.pos(self.embed(src) * math.sqrt(self.d))
        return F.log_softmax(self.decoder(self.encoder(x, mask)), dim=-1)


def loss_fn(output, target):
    return F.nll_loss(output.view(-1, NTOKEN), target.reshape(-1))


def build():
    torch.manual_seed(0)
    model = TransformerLM()
    data = torch.randint(0, NTOKEN, (SEQ + 1, BATCH))
    return trainstep.TrainSpec(model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.5),
                               (data[:-1],), data[1:], name="seq_first_lm", batch_dims=1)
