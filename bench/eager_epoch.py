"""Baseline: one Fashion-MNIST epoch of the seed's recipe in PyTorch eager
(MNIST CNN, Adadelta lr=1.0, batch 64, same normalisation, shuffled, last
partial batch dropped), then test accuracy. Prints `eager_epoch_s=<x>`.

Usage: /usr/bin/python3 bench/eager_epoch.py [--threads T] [--max-batches N]
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "examples", "mnist"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import spec as mnist  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def idx(name):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        d = f.read()
    nd = d[3]
    dims = [int.from_bytes(d[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(d, np.uint8, offset=4 + 4 * nd).reshape(dims)


def load(split):
    x = torch.from_numpy(idx(f"{split}-images-idx3-ubyte.gz").copy()).float()
    y = torch.from_numpy(idx(f"{split}-labels-idx1-ubyte.gz").copy()).long()
    return ((x / 255.0 - 0.1307) / 0.3081).unsqueeze(1), y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-batches", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    spec = mnist.build()
    model, opt = spec.model, spec.optimizer
    g = torch.Generator().manual_seed(1)
    perm = torch.randperm(len(ytr), generator=g)
    nb = len(ytr) // 64
    if a.max_batches:
        nb = min(nb, a.max_batches)
    model.train()
    t0 = time.perf_counter()
    for b in range(nb):
        i = perm[b * 64:(b + 1) * 64]
        opt.zero_grad()
        loss = F.nll_loss(model(xtr[i]), ytr[i])
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        pred = torch.cat([model(xte[i:i + 1000]).argmax(1) for i in range(0, len(yte), 1000)])
    acc = (pred == yte).float().mean().item()
    print(f"eager: {nb} steps, {nb * 64 / dt:.1f} samples/s, test accuracy {100 * acc:.2f}%")
    print(f"eager_epoch_s={dt:.3f}")


if __name__ == "__main__":
    main()
