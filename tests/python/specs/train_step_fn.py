"""A training script's own step function, exported with trainstep.export:
the seed's train_func shape (forward, loss, backward, clipping, step,
zero_grad). Run as `python train_step_fn.py OUT.tstep [dict|eval]`; "dict"
feeds the batch as {"pixels": x, "labels": y}; "eval" also passes an
eval_fn that returns each sample's loss and the logits."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2), nn.ReLU(), nn.Dropout(0.1), nn.Flatten(),
                      nn.Linear(4 * 13 * 13, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
as_dict = sys.argv[2:] == ["dict"]
with_eval = sys.argv[2:] == ["eval"]


def train_step(batch):
    x, y = (batch["pixels"], batch["labels"]) if as_dict else batch
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss


@torch.no_grad()
def eval_step(batch):
    x, y = batch
    logits = model(x)
    return F.cross_entropy(logits, y, reduction="none"), logits


if __name__ == "__main__":
    x, y = torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))
    batch = {"pixels": x, "labels": y} if as_dict else (x, y)
    program = trainstep.export(train_step, batch, sys.argv[1],
                               eval_fn=eval_step if with_eval else None)
    assert model(x).shape == (16, 10)  # the model's own forward again
    print("clip", program["clip_grad_norm"]["max_norm"])
