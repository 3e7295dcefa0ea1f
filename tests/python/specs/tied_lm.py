"""Tied weights: an embedding reused as the output projection, SGD with
momentum and weight decay, dropout on, with grad_step/apply_step."""
import torch

import trainstep
from small_models import TiedLM, lm_loss


def build():
    torch.manual_seed(7)
    model = TiedLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=1e-3)
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 50, (8, 6), generator=g)
    target = torch.randint(0, 50, (8, 6), generator=g)
    return trainstep.TrainSpec(model, lm_loss, opt, (tokens,), target, name="tied_lm",
                               golden_steps=5, export_grads=True)
