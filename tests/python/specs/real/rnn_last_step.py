"""pytorch/examples' mnist_rnn pattern (written here): a batch-first LSTM
over image rows, the last time step's output taken by `output[:, -1, :]`,
then a classifier. On torch 1.13 that slice of the (internally
transposed) LSTM output is an as_strided read of a non-contiguous value,
and its backward a select_scatter (views.py, index_decompositions.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(input_size=12, hidden_size=16, batch_first=True)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = x.reshape(-1, 12, 12)
        output, _ = self.rnn(x)
        output = output[:, -1, :]
        return F.log_softmax(self.fc(output), dim=1)


def build():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(8, 1, 12, 12)
    y = torch.randint(0, 10, (8,))
    return trainstep.TrainSpec(model, F.nll_loss, torch.optim.Adam(model.parameters(), lr=1e-2),
                               (x,), y, name="rnn_last_step")
