"""A small CNN on 3x16x16 RGB crops of 3 classes, with SGD momentum, batch
8: what `train --data images:DIR:16` feeds (tests/python/test_data_images.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

SIZE, CLASSES, BATCH = 16, 3, 8


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.head = nn.Linear(16 * 4 * 4, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(x.flatten(1))


def build():
    torch.manual_seed(0)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, 3, SIZE, SIZE, generator=g)
    y = torch.randint(0, CLASSES, (BATCH,), generator=g)
    return trainstep.TrainSpec(model, F.cross_entropy, opt, (x,), y, name="data_image_cnn",
                               golden_steps=2)
