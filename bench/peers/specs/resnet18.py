"""torchvision's resnet18 (random init, 10 classes) on 64x64 RGB images,
batch 8: the size issue 40's table already times. SGD with Nesterov
momentum. Needs torchvision, so it exports under the torch 2.x venv only.
"""
import torch
import torch.nn as nn
import torchvision

import trainstep


def build(batch_size=8, size=64, seed=1):
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                weight_decay=5e-4)
    x = torch.randn(batch_size, 3, size, size)
    y = torch.randint(0, 10, (batch_size,))
    return trainstep.TrainSpec(model, nn.CrossEntropyLoss(), optimizer, (x,), y,
                               name="resnet18", golden_steps=3)
