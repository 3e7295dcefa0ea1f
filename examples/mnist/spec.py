"""The pytorch/examples MNIST CNN, loss and optimizer (the seed's model):
Adadelta(lr=1.0), batch 64. Train with --lr-schedule step:1:0.7 for the
seed's StepLR(step_size=1, gamma=0.7)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def build(batch_size=64, seed=1):
    torch.manual_seed(seed)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    x = torch.randn(batch_size, 1, 28, 28)
    y = torch.randint(0, 10, (batch_size,))
    return trainstep.TrainSpec(model, F.nll_loss, optimizer, (x,), y, name="mnist_cnn")
