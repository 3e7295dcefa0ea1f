"""Language models whose training loop flattens the target over (seq,
batch), as pytorch/examples' word_language_model does (`target =
source[i+1:i+1+seq_len].view(-1)`); written here in that manner.

$FT=lstm (default): an LSTM LM that flattens its own output to (seq*batch,
ntoken), as the example's RNNModel does, with a fresh hidden state made in
forward. No output keeps a batch dim, so the eval step reports the batch's
loss.
$FT=transformer: a sequence-first transformer whose output stays (seq, batch,
ntoken); the loss flattens it. The eval step splits the loss per sequence.

The spec declares batch_dims=1: every tensor's dim 0 is the sequence."""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

NTOKEN, SEQ, BATCH = 256, 16, 8  # bytes: the runtime's text datasets


class LSTMLM(nn.Module):
    def __init__(self, ntoken=NTOKEN, d=16, hidden=24, layers=2, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.embed = nn.Embedding(ntoken, d)
        self.rnn = nn.LSTM(d, hidden, layers, dropout=dropout)
        self.decoder = nn.Linear(hidden, ntoken)
        self.layers, self.hidden = layers, hidden

    def init_hidden(self, batch):
        z = torch.zeros(self.layers, batch, self.hidden)
        return z, z.clone()

    def forward(self, src, state=None):
        if state is None:
            state = self.init_hidden(src.size(1))
        out, state = self.rnn(self.drop(self.embed(src)), state)
        logits = self.decoder(self.drop(out)).view(-1, self.decoder.out_features)
        return F.log_softmax(logits, dim=1), state


class TransformerLM(nn.Module):
    def __init__(self, ntoken=NTOKEN, d=16, heads=2, hidden=32, layers=1, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(ntoken, d)
        self.pos = nn.Parameter(torch.randn(64, 1, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, hidden, dropout)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.decoder = nn.Linear(d, ntoken)
        self.d = d

    def forward(self, src):
        n = src.size(0)
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        x = self.embed(src) * math.sqrt(self.d) + self.pos[:n]
        return F.log_softmax(self.decoder(self.encoder(x, mask)), dim=-1)


def lstm_loss(out, target):  # criterion(output, targets): both flat
    return F.nll_loss(out[0], target)


def transformer_loss(out, target):  # output.view(-1, ntokens), as main.py
    return F.nll_loss(out.view(-1, NTOKEN), target)


def build():
    torch.manual_seed(0)
    kind = os.environ.get("FT", "lstm")
    model, loss = (LSTMLM(), lstm_loss) if kind == "lstm" else (TransformerLM(), transformer_loss)
    data = torch.randint(0, NTOKEN, (SEQ + 1, BATCH))
    return trainstep.TrainSpec(model, loss, torch.optim.SGD(model.parameters(), lr=0.5),
                               (data[:-1],), data[1:].reshape(-1), name=f"flat_target_{kind}",
                               batch_dims=1)
