"""Gradient clipping by global norm (max_norm 0.5: the MLP's gradient norm
is above 1 on these batches, so every step clips), SGD momentum, dropout on,
with grad_step/apply_step (clipping then happens in apply_step)."""
import torch
import torch.nn.functional as F

import trainstep
from small_models import MLP, image_batch

MAX_NORM = 0.5


def build():
    torch.manual_seed(9)
    model = MLP(dropout=0.25)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = image_batch(32, seed=4)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="clip_sgd", golden_steps=5,
                               clip_grad_norm=MAX_NORM, export_grads=True)
