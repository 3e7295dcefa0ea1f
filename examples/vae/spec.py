"""The variational autoencoder of pytorch/examples (vae/main.py): 784-400-20
encoder, 20-400-784 decoder, ReLU, sigmoid output, reparameterisation with
randn_like (drawn from trainstep's Philox RNG, so eager and C++ sample the
same noise), loss = binary cross-entropy (reduction='sum') + KL divergence.
Adam(lr=1e-3), batch 128. As in the example, it samples in eval mode too:
the eval step draws from the eval stream (docs/format.md, "Random
numbers"), the same draws on every evaluation pass, so the test loss is a
one-sample estimate of the negative ELBO. forward returns the example's
tuple (recon, mu, logvar); the eval step's outputs are output/0, output/1
and output/2.

The model reconstructs its input: the target is the image itself, pixels in
[0, 1] as the example's transforms.ToTensor() gives them. Train with
`--data autoencode:fashion-mnist`; the loss is the negative ELBO summed over
the batch, and eval reports it per image.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import trainstep


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(out, x):
    """pytorch/examples' loss: reconstruction BCE summed over pixels and
    batch, plus the KL divergence of N(mu, exp(logvar)) from N(0, 1)."""
    recon, mu, logvar = out
    bce = F.binary_cross_entropy(recon, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def build(batch_size=128, seed=1):
    torch.manual_seed(seed)
    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(batch_size, 1, 28, 28)
    return trainstep.TrainSpec(model, loss_function, optimizer, (x,), x.view(-1, 784).clone(),
                               name="vae", golden_steps=5)
