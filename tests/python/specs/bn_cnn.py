"""A BatchNorm CNN with smooth activations (SiLU, tanh), so that eager
PyTorch is reproducible far below the parity tolerance and the check can be
tight: BatchNorm2d with the default momentum, with momentum=None (cumulative
average), without affine parameters, BatchNorm1d after a linear layer, and
one without running stats (batch statistics in eval mode too).
SGD with momentum, batch 32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class BnCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, 2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16, momentum=None)
        self.conv3 = nn.Conv2d(16, 16, 3, 1, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(16, affine=False, momentum=0.3)
        self.fc1 = nn.Linear(16, 32, bias=False)
        self.bn4 = nn.BatchNorm1d(32)
        self.fc2 = nn.Linear(32, 10, bias=False)
        self.bn5 = nn.BatchNorm1d(10, track_running_stats=False)  # batch stats in eval too

    def forward(self, x):
        x = F.silu(self.bn1(self.conv1(x)))
        x = F.silu(self.bn2(self.conv2(x)))
        x = torch.tanh(self.bn3(self.conv3(x)) + x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.bn5(self.fc2(torch.tanh(self.bn4(self.fc1(x)))))


def build(batch_size=32, seed=3):
    torch.manual_seed(seed)
    model = BnCnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(batch_size, 1, 16, 16)
    y = torch.randint(0, 10, (batch_size,))
    return trainstep.TrainSpec(model, nn.CrossEntropyLoss(), optimizer, (x,), y,
                               name="bn_cnn", golden_steps=5)
