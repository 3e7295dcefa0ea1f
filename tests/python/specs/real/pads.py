"""A small conv net over padded inputs: reflect, replicate and constant
F.pad (2-d and 1-d, a negative constant pad that crops), .repeat() of the
input channel and of a learned bias tile, and a cumsum along time; MSE
loss, SGD with momentum. Every pad op runs whole (decompositions.KEEP), forward
and backward."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3)
        self.conv2 = nn.Conv2d(4, 4, 3)
        self.conv3 = nn.Conv2d(4, 4, (1, 3))  # a 1-d conv (the runtime's convs are 2-d)
        self.tile = nn.Parameter(torch.randn(1, 4, 4, 4) * 0.1)
        self.fc = nn.Linear(4 * 12, 5)

    def forward(self, x):                                                   # [N, 1, 8, 8]
        x = x.repeat(1, 2, 1, 1)                                            # [N, 2, 8, 8]
        x = torch.relu(self.conv1(x))                                       # [N, 4, 6, 6]
        x = torch.relu(self.conv2(F.pad(x, (1, 1, 1, 1), mode="reflect")))  # [N, 4, 6, 6]
        x = F.pad(x, (2, 0, 1, 1), mode="replicate") + self.tile.repeat(1, 1, 2, 2)  # [N, 4, 8, 8]
        x = F.pad(x, (1, 1, -1, 2), value=0.5)                              # [N, 4, 9, 10]
        x = x.mean(2)                                                       # [N, 4, 10]
        x = self.conv3(F.pad(x, (2, 0), mode="reflect").unsqueeze(2)).squeeze(2)  # [N, 4, 10]
        x = F.pad(x, (1, 1), mode="replicate").cumsum(-1)                   # [N, 4, 12]
        return self.fc(x.flatten(1))


def build():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 1, 8, 8)
    y = torch.randn(4, 5)
    return trainstep.TrainSpec(model, F.mse_loss, torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9),
                               (x,), y, name="pads")
