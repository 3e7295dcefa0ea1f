"""accum16.py's MLP with dropout, batch 32, gradients exported: what the
data-parallel tests train when every rank must draw its own masks."""
import torch
import torch.nn.functional as F

import trainstep
from small_models import MLP, image_batch


def build():
    torch.manual_seed(10)
    model = MLP(dropout=0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = image_batch(32, seed=5)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="dp_dropout",
                               export_grads=True)
