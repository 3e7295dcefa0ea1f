"""A 2-layer LSTM character language model: byte embedding, nn.LSTM,
dropout between layers and before the output layer, a linear output layer
over 256 bytes. Trained with cross-entropy and Adam on `--data fortunes`."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

VOCAB = 256


class CharLSTM(nn.Module):
    def __init__(self, emb=64, hidden=256, layers=2, p=0.1):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, dropout=p, batch_first=True)
        self.drop = nn.Dropout(p)
        self.head = nn.Linear(hidden, VOCAB)

    def forward(self, idx):
        y, _ = self.lstm(self.emb(idx))
        return self.head(self.drop(y))


def lm_loss(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def build(batch_size=32, seed=1, block=64):
    torch.manual_seed(seed)
    model = CharLSTM()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, eps=1e-5)
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, VOCAB, (batch_size, block + 1), generator=g)
    return trainstep.TrainSpec(model, lm_loss, optimizer, (x[:, :-1],), x[:, 1:].contiguous(),
                               name="char_lstm")
