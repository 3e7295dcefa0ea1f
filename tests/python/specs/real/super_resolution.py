"""A sub-pixel super-resolution net as pytorch/examples' super_resolution
writes it: three convolutions and nn.PixelShuffle (upscale 3), MSE loss,
Adam."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init

import trainstep


class Net(nn.Module):
    def __init__(self, upscale_factor=3):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 32, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(32, 16, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(16, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight)

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        return self.pixel_shuffle(self.conv3(x))


def build():
    torch.manual_seed(0)
    model = Net()
    x = torch.rand(4, 1, 10, 10)
    y = torch.rand(4, 1, 30, 30)
    return trainstep.TrainSpec(model, F.mse_loss, torch.optim.Adam(model.parameters(), lr=1e-3),
                               (x,), y, name="super_resolution")
