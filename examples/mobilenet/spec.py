"""A small MobileNet-style CNN for 28x28 greyscale images (Fashion-MNIST):
depthwise-separable blocks (a 3x3 depthwise convolution, groups = channels,
then a 1x1 pointwise convolution), BatchNorm, Hardswish, dropout before the
classifier. Adam, batch 128.

Train: trainstep train mobilenet.tstep --data fashion-mnist --epochs 3
"""
import torch
import torch.nn as nn

import trainstep


def separable(cin, cout, stride):
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride, padding=1, groups=cin, bias=False),  # depthwise
        nn.BatchNorm2d(cin), nn.Hardswish(),
        nn.Conv2d(cin, cout, 1, bias=False),                                # pointwise
        nn.BatchNorm2d(cout), nn.Hardswish())


class MobileNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, 1, padding=1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
            separable(16, 32, 1),   # 28x28
            separable(32, 64, 2),   # 14x14
            separable(64, 64, 1),
            separable(64, 128, 2),  # 7x7
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(128, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def build(batch_size=128, seed=1):
    torch.manual_seed(seed)
    model = MobileNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, eps=1e-5)
    x = torch.randn(batch_size, 1, 28, 28)
    y = torch.randint(0, 10, (batch_size,))
    return trainstep.TrainSpec(model, nn.CrossEntropyLoss(), optimizer, (x,), y,
                               name="mobilenet", golden_steps=5)
