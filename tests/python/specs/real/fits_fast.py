"""Two things a correct artifact must not fail verify on, from
torchvision's MNASNet and ConvNeXt:
- BatchNorm with momentum 1 - 0.9997 (MNASNet's): the first step moves
  running_var near 1 by ~3e-4, which float32 stores only to 6e-8, so the
  update is resolved to the state's rounding and no further;
- a model that fits its batch within the golden steps: each sample's eval
  loss is then a log-sum-exp minus the true logit, ~1e-4, exact only to the
  logits' rounding, so it is judged at the training losses' scale."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class SlowStatsNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16, momentum=1 - 0.9997)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def build():
    torch.manual_seed(0)
    model = SlowStatsNet()
    x = torch.randn(4, 3, 8, 8)
    y = torch.randint(0, 10, (4,))
    opt = torch.optim.Adam(model.parameters(), lr=0.3)
    return trainstep.TrainSpec(model, F.cross_entropy, opt, (x,), y, name="fits_fast",
                               golden_steps=4)
