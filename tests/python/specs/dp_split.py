"""What crosses the cut between grad_step and apply_step when the runtime
derives them from train_step: BatchNorm's running stats (renewed on the
gradient side), dropout (RNG on the gradient side), clipping by global norm
and AdamW with AMSGrad (the update side). Batch 32, no --grads."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep
from small_models import image_batch


class BnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, stride=2)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(8 * 13 * 13, 10)

    def forward(self, x):
        x = self.drop(F.relu(self.bn(self.conv(x))))
        return F.log_softmax(self.fc(x.flatten(1)), dim=1)


def build():
    torch.manual_seed(12)
    model = BnNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05, amsgrad=True)
    x, y = image_batch(32, seed=6)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (x,), y, name="dp_split",
                               clip_grad_norm=1.0)
