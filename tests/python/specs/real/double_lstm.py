"""A float64 model written as pytorch/examples' time_sequence_prediction
writes Sequence: two nn.LSTMCell stepped in a Python loop over the time
steps, then nn.Linear, the whole model .double(), MSE loss on sine waves.
The example trains with LBFGS; Adam here. Small sizes: batch 4, 12 time
steps, hidden 16."""
import numpy as np
import torch
import torch.nn as nn

import trainstep

HIDDEN, BATCH, STEPS = 16, 4, 12


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def build():
    np.random.seed(2)
    torch.manual_seed(0)
    T, L = 20, STEPS + 1
    x = np.empty((BATCH, L), 'int64')
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, BATCH).reshape(BATCH, 1)
    data = np.sin(x / 1.0 / T).astype('float64')
    input = torch.from_numpy(data[:, :-1])
    target = torch.from_numpy(data[:, 1:])
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(seq.parameters(), lr=0.01)
    return trainstep.TrainSpec(seq, criterion, optimizer, (input,), target, name="double_lstm")
