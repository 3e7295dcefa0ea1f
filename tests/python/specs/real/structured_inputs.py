"""A model whose inputs and target are structures, as a tokenised-text
pipeline hands them over: a dict batch of token ids and a padding mask
(with a non-tensor option beside them), a tuple of dense features, and a
dict target (several_targets.py has several target tensors)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class MaskedBag(nn.Module):
    def __init__(self, vocab=50, dim=16, feats=3, classes=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.dense = nn.Linear(feats, dim)
        self.head = nn.Linear(2 * dim, classes)

    def forward(self, batch, extras):
        h = self.emb(batch["ids"])                       # (B, T, D)
        m = batch["mask"].unsqueeze(-1).to(h.dtype)      # (B, T, 1)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
        if batch["pool"] == "max":
            pooled = torch.maximum(pooled, (h * m).amax(1))
        (feats,) = extras
        return self.head(torch.cat([pooled, torch.tanh(self.dense(feats))], dim=1))


def loss_fn(logits, target):
    loss = F.cross_entropy(logits, target["label"])
    return loss


def build():
    torch.manual_seed(0)
    model = MaskedBag()
    b, t = 6, 7
    ids = torch.randint(1, 50, (b, t))
    lengths = torch.randint(2, t + 1, (b,))
    mask = torch.arange(t).unsqueeze(0) < lengths.unsqueeze(1)
    ids = ids.masked_fill(~mask, 0)
    batch = {"ids": ids, "mask": mask, "pool": "max"}
    extras = (torch.randn(b, 3),)
    target = {"label": torch.randint(0, 4, (b,))}
    return trainstep.TrainSpec(model, loss_fn, torch.optim.Adam(model.parameters(), lr=1e-2),
                               (batch, extras), target, name="structured_inputs")
