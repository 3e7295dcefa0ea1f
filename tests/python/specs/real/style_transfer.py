"""An image transformation net in the manner of pytorch/examples'
fast_neural_style (written here): reflection-padded convolutions, affine
InstanceNorm2d (which runs as batch norm over a repeated weight), residual
blocks, and upsampling by nearest-neighbour interpolation before a
convolution instead of a transposed convolution. MSE to a target image,
Adam."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class ConvLayer(nn.Module):
    def __init__(self, cin, cout, kernel, stride=1):
        super().__init__()
        self.pad = nn.ReflectionPad2d(kernel // 2)
        self.conv = nn.Conv2d(cin, cout, kernel, stride)

    def forward(self, x):
        return self.conv(self.pad(x))


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = ConvLayer(channels, channels, 3)
        self.in1 = nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, 3)
        self.in2 = nn.InstanceNorm2d(channels, affine=True)

    def forward(self, x):
        y = F.relu(self.in1(self.conv1(x)))
        return self.in2(self.conv2(y)) + x


class UpsampleConvLayer(nn.Module):
    def __init__(self, cin, cout, kernel, upsample):
        super().__init__()
        self.upsample = upsample
        self.conv = ConvLayer(cin, cout, kernel)

    def forward(self, x):
        x = F.interpolate(x, mode="nearest", scale_factor=self.upsample)
        return self.conv(x)


class TransformerNet(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv1 = ConvLayer(3, width, 5)
        self.in1 = nn.InstanceNorm2d(width, affine=True)
        self.conv2 = ConvLayer(width, 2 * width, 3, stride=2)
        self.in2 = nn.InstanceNorm2d(2 * width, affine=True)
        self.res1 = ResidualBlock(2 * width)
        self.res2 = ResidualBlock(2 * width)
        self.up = UpsampleConvLayer(2 * width, width, 3, upsample=2)
        self.in3 = nn.InstanceNorm2d(width, affine=True)
        self.out = ConvLayer(width, 3, 5)

    def forward(self, x):
        y = F.relu(self.in1(self.conv1(x)))
        y = F.relu(self.in2(self.conv2(y)))
        y = self.res2(self.res1(y))
        y = F.relu(self.in3(self.up(y)))
        return self.out(y)


def build():
    torch.manual_seed(0)
    model = TransformerNet()
    x = torch.rand(2, 3, 16, 16)
    y = torch.rand(2, 3, 16, 16)
    return trainstep.TrainSpec(model, F.mse_loss, torch.optim.Adam(model.parameters(), lr=1e-3),
                               (x,), y, name="style_transfer")
