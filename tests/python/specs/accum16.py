"""No dropout, no batch-dependent layers: 4 x 16 accumulated must equal one
batch of 64 (accum64.py has the same model and initial weights)."""
import torch
import torch.nn.functional as F

import trainstep
from small_models import MLP, image_batch

BATCH = 16


def build(batch=BATCH):
    torch.manual_seed(10)
    model = MLP(dropout=0.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = image_batch(batch, seed=5)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name=f"accum{batch}",
                               export_grads=True)
