"""How far eager PyTorch moves from itself under float32 summation noise:
the floor under any `trainstep verify --tol` for a spec.

Runs the spec's golden steps in eager PyTorch (same batches, same dropout
masks) once as is and then with noise of REL relative to each tensor's
largest magnitude, as a different summation order would add:
  grads   on every gradient before each optimizer step;
  params  on the initial parameters (so the forward pass differs too, and
          ReLU / max-pool / Hardswish kinks can flip).
It prints each state tensor's largest difference relative to its largest
magnitude, worst last. Models whose gradients hinge on kinks, BatchNorm's
cancelling sums, or Adam's per-element normalisation can be far more
sensitive than REL; a reimplementation cannot be expected to match eager
more closely than eager matches itself.

  /usr/bin/python3 scripts/eager_spread.py SPEC.py [--steps 5] [--rel 1e-7] [--trials 3]
                                             [--noise grads|params]
"""
import argparse
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from trainstep import capture, export, golden, rng  # noqa: E402


def run(spec, parts, steps, rel, gen, noise):
    model = copy.deepcopy(spec.model)
    model.train()
    if gen is not None and noise == "params":
        with torch.no_grad():
            for p in model.parameters():
                p += rel * p.abs().max() * torch.randn(p.shape, generator=gen)
    group = {k: v for k, v in spec.optimizer.param_groups[0].items() if k != "params"}
    opt = type(spec.optimizer)(model.parameters(), **group)
    losses = []
    for k, (xs, y) in enumerate(golden.make_batches(parts, steps, 0)):
        with rng.stream(torch.tensor(0), torch.tensor(k)):
            opt.zero_grad()
            loss = spec.loss_fn(model(*xs), y)
            loss.backward()
        if gen is not None and noise == "grads":
            for p in model.parameters():
                if p.grad is not None:
                    scale = p.grad.abs().max()
                    p.grad += rel * scale * torch.randn(p.grad.shape, generator=gen)
        opt.step()
        losses.append(float(loss))
    state = {n: t.detach().clone() for n, t in model.state_dict().items()}
    for i, p in enumerate(model.parameters()):
        for key, v in opt.state[p].items():
            if isinstance(v, torch.Tensor) and v.dim() > 0:
                state[f"optim/{i}/{key}"] = v.clone()
    return losses, state


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rel", type=float, default=1e-7)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--show", type=int, default=5)
    ap.add_argument("--noise", choices=("grads", "params"), default="grads")
    a = ap.parse_args()
    spec = export.load_spec(a.spec)
    parts = capture.StepParts(spec)
    base_loss, base = run(spec, parts, a.steps, 0, None, a.noise)
    worst = {}
    loss_diff = 0.0
    for t in range(a.trials):
        losses, state = run(spec, parts, a.steps, a.rel, torch.Generator().manual_seed(t), a.noise)
        loss_diff = max(loss_diff, max(abs(x - y) / abs(y) for x, y in zip(losses, base_loss)))
        for n, ref in base.items():
            r, s = ref.double(), state[n].double()
            d = float((r - s).abs().max() / r.abs().max().clamp_min(1e-30))
            worst[n] = max(worst.get(n, 0.0), d)
    for n, d in sorted(worst.items(), key=lambda kv: kv[1])[-a.show:]:
        print(f"{d:.2e}  {n}")
    print(f"losses: largest relative difference {loss_diff:.2e}")
    print(f"spread: {max(worst.values()):.2e} (worst state tensor over {a.trials} trials, "
          f"{a.steps} steps, {a.noise} noise {a.rel:g})")


if __name__ == "__main__":
    main()
