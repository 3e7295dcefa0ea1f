"""torchvision's mobilenet_v3_small (random init, 10 classes) on 64x64 RGB
images, batch 8: depthwise convolutions, squeeze-and-excitation,
Hardswish/Hardsigmoid, dropout. Adam. Needs torchvision (torch 2.x venv).
"""
import torch
import torch.nn as nn
import torchvision

import trainstep


def build(batch_size=8, size=64, seed=1):
    torch.manual_seed(seed)
    model = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-5)
    x = torch.randn(batch_size, 3, size, size)
    y = torch.randint(0, 10, (batch_size,))
    return trainstep.TrainSpec(model, nn.CrossEntropyLoss(), optimizer, (x,), y,
                               name="mobilenet_v3_small", golden_steps=3)
