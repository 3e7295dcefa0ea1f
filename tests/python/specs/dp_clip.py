"""Gradient clipping by global norm 0.5 (every step clips: the MLP's
gradient norm is above 1 on these batches), SGD momentum, no dropout,
batch 32, gradients exported: 2 ranks x 32 must clip the averaged gradient,
as 1 rank x 64 (dp_clip64.py) clips its own."""
import torch
import torch.nn.functional as F

import trainstep
from small_models import MLP, image_batch


def build(batch=32):
    torch.manual_seed(9)
    model = MLP(dropout=0.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = image_batch(batch, seed=4)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="dp_clip",
                               clip_grad_norm=0.5, export_grads=True)
