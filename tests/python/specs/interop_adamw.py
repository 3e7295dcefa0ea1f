"""AdamW with two param groups (no weight decay on biases, other LR) on the
MLP with dropout: the PyTorch checkpoint interop tests' model."""
import torch
import torch.nn.functional as F

import trainstep
from small_models import MLP, decay_groups, image_batch


def build():
    torch.manual_seed(11)
    model = MLP(dropout=0.2)
    opt = torch.optim.AdamW(decay_groups(model, 2e-3, 5e-2, 4e-3), lr=2e-3, eps=1e-6)
    x, y = image_batch(32, seed=6)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="interop_adamw")
