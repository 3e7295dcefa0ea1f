"""An LSTM language model written as pytorch/examples' word_language_model
writes RNNModel: init_hidden takes `weight = next(self.parameters())` and
builds the zero state with weight.new_zeros. (Batch-first data here; the
example's own data is sequence-first.)"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

NTOKEN, SEQ, BATCH = 40, 9, 6


class RNNModel(nn.Module):
    def __init__(self, ntoken=NTOKEN, ninp=16, nhid=24, nlayers=2, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))

    def forward(self, x):
        hidden = self.init_hidden(x.shape[0])
        emb = self.drop(self.encoder(x.t()))
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(self.drop(output)).transpose(0, 1)


def loss_fn(out, target):
    return F.cross_entropy(out.reshape(-1, NTOKEN), target.reshape(-1))


def build():
    torch.manual_seed(0)
    model = RNNModel()
    x = torch.randint(0, NTOKEN, (BATCH, SEQ))
    y = torch.randint(0, NTOKEN, (BATCH, SEQ))
    return trainstep.TrainSpec(model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.5),
                               (x,), y, name="init_hidden_lm")
