"""Channel dropout as CNNs and RNN code write it: nn.Dropout2d after a
convolution (pytorch/examples' mnist_rnn and older MNIST nets use
F.dropout2d), nn.Dropout1d on a conv1d-style feature map, and AlphaDropout
in a SELU MLP head; every mask from trainstep's Philox stream."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.drop2d = nn.Dropout2d(0.3)
        self.drop1d = nn.Dropout1d(0.2)
        self.fc1 = nn.Linear(8 * 8 * 8, 32)
        self.adrop = nn.AlphaDropout(0.2)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        h = self.drop2d(F.relu(self.conv(x)))
        h = self.drop1d(h.flatten(2))  # (N, C, L)
        h = self.adrop(F.selu(self.fc1(h.flatten(1))))
        return F.log_softmax(self.fc2(h), dim=1)


def build():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(6, 1, 8, 8)
    y = torch.randint(0, 4, (6,))
    return trainstep.TrainSpec(model, F.nll_loss, torch.optim.SGD(model.parameters(), lr=0.1),
                               (x,), y, name="channel_dropout")
