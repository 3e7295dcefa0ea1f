"""A small ResNet for 28x28 greyscale images (Fashion-MNIST): BatchNorm,
residual adds, stride-2 convolutions with padding, a 1x1 projection
shortcut, adaptive average pooling and cross-entropy with label smoothing.
SGD with Nesterov momentum, batch 128.

Train: trainstep train resnet.tstep --data fashion-mnist --epochs 3
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Block(nn.Module):
    """Two 3x3 conv+BN; the shortcut is the identity, or a strided 1x1
    conv+BN when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Identity()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.short(x))


class ResNet(nn.Module):
    def __init__(self, width=16, classes=10):
        super().__init__()
        w = width
        self.stem = nn.Sequential(nn.Conv2d(1, w, 3, 1, padding=1, bias=False),
                                  nn.BatchNorm2d(w), nn.ReLU())
        self.layer1 = Block(w, w, 1)          # 28x28
        self.layer2 = Block(w, 2 * w, 2)      # 14x14
        self.layer3 = Block(2 * w, 4 * w, 2)  # 7x7
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * w, classes)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


def build(batch_size=128, seed=1):
    torch.manual_seed(seed)
    model = ResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                weight_decay=5e-4)
    loss = nn.CrossEntropyLoss(label_smoothing=0.1)
    x = torch.randn(batch_size, 1, 28, 28)
    y = torch.randint(0, 10, (batch_size,))
    return trainstep.TrainSpec(model, loss, optimizer, (x,), y, name="resnet", golden_steps=5)
