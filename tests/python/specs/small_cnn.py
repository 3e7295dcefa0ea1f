"""A small CNN (conv, relu, max-pool, dropout, linear, log-softmax) with
Adam, batch 8: every kind of step node at a size where recording each
node's value (export --trace-values) stays small."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(4 * 5 * 5, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        x = torch.flatten(self.drop(x), 1)
        return F.log_softmax(self.fc(x), dim=1)


def build():
    torch.manual_seed(3)
    model = SmallCNN()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    return trainstep.TrainSpec(model, F.nll_loss, opt, (torch.randn(8, 1, 12, 12),),
                               torch.randint(0, 10, (8,)), name="small_cnn", golden_steps=2)
