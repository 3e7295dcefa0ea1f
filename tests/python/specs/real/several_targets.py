"""A multi-task tagger with several targets, as a detection or tagging
pipeline hands them over: a dict target of per-token tags, a per-sentence
topic and a float length, one loss summed over the three heads. The data
is sequence-first: the tokens and the tags hold the batch on dim 1, the
topic and the length on dim 0 (inferred from the example batch), and the
model returns a dict."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class Tagger(nn.Module):
    def __init__(self, vocab=30, dim=8, tags=4, topics=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.tag = nn.Linear(dim, tags)
        self.topic = nn.Linear(dim, topics)
        self.length = nn.Linear(dim, 1)

    def forward(self, ids):                      # (T, B)
        h = torch.tanh(self.mix(self.emb(ids)))  # (T, B, D)
        pooled = h.mean(0)                       # (B, D)
        return {"tags": self.tag(h), "topic": self.topic(pooled),
                "length": self.length(pooled).squeeze(-1)}


def loss_fn(out, target):
    tags = F.cross_entropy(out["tags"].flatten(0, 1), target["tags"].flatten())
    topic = F.cross_entropy(out["topic"], target["topic"])
    return tags + topic + 0.1 * F.mse_loss(out["length"], target["length"])


def build():
    torch.manual_seed(0)
    model = Tagger()
    t, b = 7, 5
    ids = torch.randint(0, 30, (t, b))
    target = {"tags": torch.randint(0, 4, (t, b)), "topic": torch.randint(0, 3, (b,)),
              "length": torch.rand(b) * t}
    return trainstep.TrainSpec(model, loss_fn, torch.optim.AdamW(model.parameters(), lr=1e-2),
                               (ids,), target, name="several_targets")
