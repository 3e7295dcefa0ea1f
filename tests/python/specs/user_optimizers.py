"""Optimizers written here as users write theirs, for the traced-optimizer
tests: plain torch.optim.Optimizer subclasses whose step() updates in place.

- SignMomentum: Lion's rule (sign of an interpolated momentum), state made
  lazily, a Python-int step count read by a bias correction, the LR as a
  Python float through `alpha=-lr` and `1 - lr * wd`.
- TwoRules: param groups choose their rule by a group option, "adam"
  (Adam-like, bias-corrected with math.sqrt of a Python float) or
  "momentum" (heavy ball with dampening, whose first step differs: the
  buffer starts as the gradient itself).
- GroupStep: an Adam-like rule counting its steps in the param group, as
  pytorch-optimizer's optimizers do.
- Muon: Newton-Schulz-orthogonalised momentum for matrices, in float32.
- MuonBf16: Muon as it is published: the Nesterov lerp made in place on
  p.grad, and the iteration in bfloat16 (the step holds bfloat16 values of
  its own, so the export calibrates on bfloat16's noise).
- Bounded: AdaBound's shape: torch.full from the LR, clamp between bounds
  made of the LR and a group step count.
- SignMomentum(wrong=True): a planted bug that only the captured step has
  (its step size is off by 1 % while torch.compiler.is_compiling(), which
  the capture says and eager does not), which verify must catch.
"""
import math

import torch


class SignMomentum(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, wrong=False):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))
        self.wrong = wrong

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["step"] = 0
                state["step"] += 1
                exp_avg = state["exp_avg"]
                p.mul_(1 - lr * wd)
                update = exp_avg.mul(b1).add(p.grad, alpha=1 - b1).sign_()
                # A bias-corrected step size: 1 / sqrt(1 - b1^t) of the LR.
                scale = lr / math.sqrt(1 - b1 ** state["step"])
                if self.wrong and torch.compiler.is_compiling():
                    scale = scale * 1.01
                p.add_(update, alpha=-scale)
                exp_avg.mul_(b2).add_(p.grad, alpha=1 - b2)


class TwoRules(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, rule="adam", beta=0.9, beta2=0.999, eps=1e-8,
                 dampening=0.5):
        super().__init__(params, dict(lr=lr, rule=rule, beta=beta, beta2=beta2, eps=eps,
                                      dampening=dampening))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if group["rule"] == "adam":
                    self._adam(p, group)
                else:
                    self._momentum(p, group)

    def _adam(self, p, group):
        state = self.state[p]
        if not state:
            state["t"] = 0
            state["m"] = torch.zeros_like(p)
            state["v"] = torch.zeros_like(p)
        state["t"] += 1
        b1, b2 = group["beta"], group["beta2"]
        state["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
        state["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
        c1 = 1 - b1 ** state["t"]
        c2 = 1 - b2 ** state["t"]
        denom = (state["v"].sqrt() / math.sqrt(c2)).add_(group["eps"])
        p.addcdiv_(state["m"], denom, value=-group["lr"] / c1)

    def _momentum(self, p, group):
        state = self.state[p]
        if "buf" not in state:
            state["buf"] = p.grad.clone()
        else:
            state["buf"].mul_(group["beta"]).add_(p.grad, alpha=1 - group["dampening"])
        p.add_(state["buf"], alpha=-group["lr"])


class _LrOnly(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, dict(lr=lr))


class Warmup(_LrOnly):
    """Branches on its Python step count: refused at export, naming the line."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = state.get("step", 0) + 1
                lr = group["lr"] if state["step"] > 10 else group["lr"] * 0.1
                p.add_(p.grad, alpha=-lr)


class ReadsItem(_LrOnly):
    """Reads a tensor step count with .item(): refused, naming the line."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros(())
                state["step"] += 1
                p.add_(p.grad, alpha=-group["lr"] / state["step"].item())


class GroupStep(torch.optim.Optimizer):
    """Counts steps in its param group, as pytorch-optimizer's optimizers do
    (`if "step" not in group: group["step"] = 0`, then `+= 1`), and reads
    the count in an Adam-like bias correction through math.pow."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            if "step" not in group:
                group["step"] = 0
            group["step"] += 1
            b1, b2 = group["betas"]
            c1 = 1.0 - math.pow(b1, group["step"])
            c2 = 1.0 - math.pow(b2, group["step"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["exp_avg"].mul_(b1).add_(p.grad, alpha=1 - b1)
                state["exp_avg_sq"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                denom = state["exp_avg_sq"].div(c2).sqrt_().add_(group["eps"])
                p.addcdiv_(state["exp_avg"], denom, value=-group["lr"] / c1)


def newton_schulz(g, steps=5, eps=1e-7, dtype=torch.float32):
    """The orthogonalisation Muon applies to a 2-D update: a quintic
    Newton-Schulz iteration towards U V^T of g's SVD, in `dtype`."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.to(dtype)
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.t()
    x = x / (x.norm() + eps)
    for _ in range(steps):
        m = x @ x.t()
        x = a * x + (b * m + c * m @ m) @ x
    return x.t() if tall else x


class Muon(torch.optim.Optimizer):
    """Muon's rule as its authors describe it, written here: Nesterov
    momentum whose update is orthogonalised by Newton-Schulz for matrices
    (conv kernels flattened to 2-D), scaled by sqrt(max(1, rows/cols));
    groups with use_muon=False take plain momentum SGD."""

    in_place, ns_dtype = False, torch.float32

    def __init__(self, params, lr=0.02, momentum=0.95, weight_decay=0.0, use_muon=True):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      use_muon=use_muon))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - group["momentum"])
                lerp = p.grad.lerp_ if self.in_place else p.grad.lerp
                update = lerp(buf, group["momentum"])
                if group["use_muon"] and p.dim() >= 2:
                    flat = update.reshape(update.size(0), -1)
                    o = newton_schulz(flat, dtype=self.ns_dtype)
                    o = o * max(1, flat.size(0) / flat.size(1)) ** 0.5
                    update = o.reshape(p.shape).to(p.dtype)
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(update, alpha=-group["lr"])


class MuonBf16(Muon):
    """Muon with its update made as the published one makes it: p.grad
    lerped towards the buffer in place (an eager probe of step() must not
    see that gradient again), then Newton-Schulz in bfloat16."""
    in_place, ns_dtype = True, torch.bfloat16


class Bounded(torch.optim.Optimizer):
    """AdaBound's shape, written here: an Adam-like step size made a tensor
    with torch.full from the LR, clipped between bounds that close in on a
    final LR as the group's step count grows (clamp with traced bounds)."""

    def __init__(self, params, lr=1e-3, final_lr=0.1, gamma=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, final_lr=final_lr, gamma=gamma, betas=betas, eps=eps))
        self.base_lr = lr

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            group["step"] = group.get("step", 0) + 1
            b1, b2 = group["betas"]
            final = group["final_lr"] * group["lr"] / self.base_lr
            lower = final * (1 - 1 / (group["gamma"] * group["step"] + 1))
            upper = final * (1 + 1 / (group["gamma"] * group["step"]))
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                size = torch.full((), group["lr"], dtype=p.dtype)
                size = (size / (v.sqrt() + group["eps"])).clamp_(lower, upper)
                p.sub_(size * m)


class GroupOption(_LrOnly):
    """Rewrites a param group option that is no number: refused at export,
    the option would be a constant of the step."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            group["history"] = group.get("history", ()) + (1,)
            for p in group["params"]:
                p.add_(p.grad, alpha=-group["lr"])


class BoundSqrt(_LrOnly):
    """Takes math's sqrt bound by name before tracing began: the LR leaks as
    a plain float (NaN while traced), which the export names."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad, alpha=-_bound_sqrt(group["lr"]))


_bound_sqrt = math.sqrt
