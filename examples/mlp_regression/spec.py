"""An MLP regressor with MSE loss on tabular data: 10 features -> 1 target.
Trained on generated Friedman #1 data (`--data friedman1`, noise sd 1), whose
best possible test MSE is the noise variance, 1.0. Adam, batch 64.

Train: trainstep train mlp_regression.tstep --data friedman1 --epochs 40 --lr-schedule cosine:40
"""
import torch
import torch.nn as nn

import trainstep


class MLP(nn.Module):
    def __init__(self, features=10, hidden=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.SiLU(),
                                 nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


def build(batch_size=64, seed=1):
    torch.manual_seed(seed)
    model = MLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, eps=1e-5)
    x = torch.rand(batch_size, 10)
    y = 10 * torch.rand(batch_size, 1) + 10
    return trainstep.TrainSpec(model, nn.MSELoss(), optimizer, (x,), y,
                               name="mlp_regression", golden_steps=5)
