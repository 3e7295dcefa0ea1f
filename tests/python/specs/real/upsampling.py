"""A small encoder-decoder over images: convolutions, average and adaptive
pooling down, F.interpolate up (nearest with scale_factor=2, bilinear with
align_corners False and True), MSE loss, SGD with momentum. Exercises the
upsampling and pooling ops forward and backward end to end."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.AvgPool2d(2)                          # 12x12 -> 6x6
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        # 6x6 -> 3x3: torch 1.13 lowers an adaptive average pool to
        # avg_pool2d when the sizes divide (and to index arithmetic the
        # runtime lacks when they do not); 2.x keeps _adaptive_avg_pool2d.
        self.squeeze = nn.AdaptiveAvgPool2d((3, 3))
        self.peak = nn.AdaptiveMaxPool2d((4, 5))             # a side branch, overlapping cells
        self.dec1 = nn.Conv2d(8, 8, 3, padding=1)
        self.dec2 = nn.Conv2d(8, 8, 3, padding=1)
        self.out = nn.Conv2d(8, 3, 3, padding=1)

    def forward(self, x):
        h = F.relu(self.enc(x))
        h = F.relu(self.mid(self.pool(h)))
        s = self.squeeze(h)                                   # 3x3
        s = s + F.interpolate(self.peak(h), size=(3, 3), mode="nearest")
        h = F.interpolate(s, scale_factor=2, mode="nearest")  # 6x6
        h = F.relu(self.dec1(h))
        h = F.interpolate(h, scale_factor=1.5, mode="bilinear", align_corners=False)  # 9x9
        h = F.relu(self.dec2(h))
        h = F.interpolate(h, size=(12, 12), mode="bilinear", align_corners=True)
        return self.out(h)


def build():
    torch.manual_seed(0)
    model = Net()
    x = torch.rand(2, 3, 12, 12)
    y = torch.rand(2, 3, 12, 12)
    return trainstep.TrainSpec(model, F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                               (x,), y, name="upsampling")
