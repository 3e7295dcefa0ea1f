"""A batch_first=False GRU classifier, as RNN tutorials write it: input
(seq, batch, feature), the last time step's output to a linear layer,
target (batch,). The batch (6) is on dim 1 of the input and dim 0 of the
target, inferred from the example batch (their dim 0s disagree)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(input_size=5, hidden_size=12, num_layers=2, dropout=0.2)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        out, _ = self.rnn(x)
        return F.log_softmax(self.fc(out[-1]), dim=1)


def build():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(9, 6, 5)
    y = torch.randint(0, 3, (6,))
    return trainstep.TrainSpec(model, F.nll_loss, torch.optim.RMSprop(model.parameters(), lr=1e-2),
                               (x,), y, name="seq_first_gru")
