"""Small models for the optimizer-feature specs (28x28 inputs, 10 classes,
so `trainstep train` can run them on Fashion-MNIST subsets)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, dropout=0.25, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(hidden, 32)
        self.fc3 = nn.Linear(32, 10)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        x = self.dropout(x)
        x = F.relu(self.fc2(x))
        return F.log_softmax(self.fc3(x), dim=1)


class FrozenUnused(nn.Module):
    """fc1 is frozen (requires_grad=False); `unused` is never called (an
    unused branch: torch leaves its .grad None)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 32)
        self.fc2 = nn.Linear(32, 10)
        self.unused = nn.Linear(32, 32)
        self.dropout = nn.Dropout(0.2)
        self.fc1.requires_grad_(False)

    def forward(self, x):
        x = self.dropout(F.relu(self.fc1(torch.flatten(x, 1))))
        return F.log_softmax(self.fc2(x), dim=1)


class TiedMLP(nn.Module):
    """mid2 shares mid1's weight (one Parameter, two state_dict names)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(784, 32)
        self.mid1 = nn.Linear(32, 32)
        self.mid2 = nn.Linear(32, 32)
        self.mid2.weight = self.mid1.weight
        self.out = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.tanh(self.inp(torch.flatten(x, 1)))
        x = torch.tanh(self.mid2(torch.tanh(self.mid1(x))))
        return F.log_softmax(self.out(x), dim=1)


class TiedLM(nn.Module):
    """A tiny language model whose output projection is the embedding."""

    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.hidden = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(0.1)
        self.out = nn.Linear(dim, vocab)
        self.out.weight = self.emb.weight

    def forward(self, tokens):
        h = self.dropout(torch.tanh(self.hidden(self.emb(tokens))))
        return self.out(h)  # [batch, time, vocab]


def lm_loss(logits, target):
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def image_batch(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)


def decay_groups(model, lr, wd, bias_lr):
    """The usual split: weight decay on weights, none on biases."""
    weights = [p for n, p in model.named_parameters() if not n.endswith("bias")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    return [{"params": weights, "weight_decay": wd},
            {"params": biases, "weight_decay": 0.0, "lr": bias_lr}]
