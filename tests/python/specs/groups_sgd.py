"""Two param groups (weight decay on weights, none on biases, the biases at
twice the LR), SGD with Nesterov momentum, dropout on."""
import torch
import torch.nn.functional as F

import trainstep
from small_models import MLP, decay_groups, image_batch


def build():
    torch.manual_seed(5)
    model = MLP(dropout=0.25)
    opt = torch.optim.SGD(decay_groups(model, 0.05, 1e-2, 0.1), lr=0.05, momentum=0.9,
                          nesterov=True)
    x, y = image_batch(32)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="groups_sgd", golden_steps=5)
