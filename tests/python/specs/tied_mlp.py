"""Tied weights on image data (trainable from the CLI), Adam."""
import torch
import torch.nn.functional as F

import trainstep
from small_models import TiedMLP, image_batch


def build():
    torch.manual_seed(8)
    model = TiedMLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-6)
    x, y = image_batch(64, seed=2)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="tied_mlp")
