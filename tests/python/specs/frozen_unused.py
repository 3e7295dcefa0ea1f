"""A frozen layer and a never-used layer, both in the optimizer (built on
model.parameters()), with Adagrad(weight_decay): torch updates neither and
keeps their Adagrad state at its initial value."""
import torch
import torch.nn.functional as F

import trainstep
from small_models import FrozenUnused, image_batch


def build():
    torch.manual_seed(6)
    model = FrozenUnused()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05, weight_decay=1e-2)
    x, y = image_batch(32, seed=1)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="frozen_unused",
                               golden_steps=5)
