"""A ResNet-18-shaped net (written here): a 7x7 stride-2 stem with max
pool, four stages of two BasicBlocks (3x3 convs with BatchNorm, ReLU after
the residual add, a strided 1x1 projection), global average pool, at batch
4 on 64x64 images. The last stage normalises 16 values per channel, so a
ReLU whose input sits near its kink and lands on the other side after a
reordered sum changes the next step's gradients everywhere. verify's
calibration must see that (golden.py sizes the parameters' noise to the
convs' fan-in); with one rounding of noise the default tolerance failed
this correct artifact after 2 steps."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.project = None
        if stride != 1 or cin != cout:
            self.project = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                         nn.BatchNorm2d(cout))

    def forward(self, x):
        skip = x if self.project is None else self.project(x)
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + skip)


class ResNet(nn.Module):
    def __init__(self, width=64, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for stage, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
            blocks += [BasicBlock(cin, cout, 1 if stage == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        h = F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1)
        return self.fc(torch.flatten(h, 1))


def build():
    torch.manual_seed(0)
    model = ResNet()
    x = torch.randn(4, 3, 64, 64)
    y = torch.randint(0, 10, (4,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return trainstep.TrainSpec(model, F.cross_entropy, opt, (x,), y, name="resnet_kinks",
                               golden_steps=2)
