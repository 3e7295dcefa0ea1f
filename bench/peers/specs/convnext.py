"""timm's convnext_atto (random init, 10 classes) on 64x64 RGB images,
batch 8: ConvNeXt blocks (7x7 depthwise convolution, LayerNorm, Linear +
GELU MLP, layer scale), the smallest ConvNeXt config timm defines. AdamW.
Needs timm (torch 2.x venv); create_model with pretrained=False downloads
nothing.
"""
import timm
import torch
import torch.nn as nn

import trainstep


def build(batch_size=8, size=64, seed=1):
    torch.manual_seed(seed)
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=10)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05, eps=1e-5)
    x = torch.randn(batch_size, 3, size, size)
    y = torch.randint(0, 10, (batch_size,))
    return trainstep.TrainSpec(model, nn.CrossEntropyLoss(), optimizer, (x,), y,
                               name="convnext", golden_steps=3)
