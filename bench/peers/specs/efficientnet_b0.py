"""torchvision's efficientnet_b0 (random init, 10 classes) on 64x64 RGB
images, batch 4: MBConv blocks with squeeze-and-excitation, SiLU and
stochastic depth. SGD with momentum. Needs torchvision (torch 2.x venv).
"""
import torch
import torch.nn as nn
import torchvision

import trainstep


def build(batch_size=4, size=64, seed=1):
    torch.manual_seed(seed)
    model = torchvision.models.efficientnet_b0(weights=None, num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-5)
    x = torch.randn(batch_size, 3, size, size)
    y = torch.randint(0, 10, (batch_size,))
    return trainstep.TrainSpec(model, nn.CrossEntropyLoss(), optimizer, (x,), y,
                               name="efficientnet_b0", golden_steps=3)
