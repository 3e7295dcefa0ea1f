"""The golden trace: K training steps of *eager* PyTorch with the user's real
torch.optim optimizer and the trainstep RNG, recorded for `trainstep verify`.

It is an independent oracle for the captured graph: eager autograd and
torch.optim, not our functional rewrite, produce the expected numbers.

It also calibrates verify's tolerance: the same eager steps are rerun with
noise on the gradients (one rounding: the dtype's epsilon relative to each
tensor's largest magnitude) or on the initial parameters (sqrt(fan-in)
roundings, as a dot product summed in another order differs), as a
different summation order adds. How far eager then moves from itself, per compared
value, is the "spread"; verify allows FACTOR times it, never less than the
dtype's FLOOR. A reimplementation cannot match eager more closely than eager
matches itself, and a wrong rule (an optimizer update off by a percent)
still shows in the first step's update, whose spread stays small even where
several steps of ReLU or max-pool ties grow.
"""
import contextlib
import copy
import math

import torch

from . import optim as ts_optim
from . import batch, capture, pytree, rng

FACTOR = 10.0
FLOOR = {"float32": 1e-4, "float64": 1e-9}
# Under autocast no value is resolved finer than one bfloat16 rounding
# (2^-8 relative): an output rounded an ulp apart moves the loss that much
# even where eager's noise, which rounds away in the bfloat16 copies, did not.
FLOOR_BF16 = {"float32": 2.0 ** -8, "float64": 2.0 ** -8}
NOISE = ("grads", "params")  # one trial of each per round
# Under bfloat16 compute also "signs", once: every gradient element within one
# bfloat16 rounding of the tensor's RMS of zero takes the other sign
# (_flip_near_zero).
NOISE_BF16 = NOISE + ("signs",)
ROUNDS = 2
# A value whose noisy runs go non-finite is chaotic: its check is then only
# as strict as FACTOR x its scale. A finite spread is kept as it is, however
# large: BatchNorm over two samples at 1x1 (timm's mobilenetv3 at 32x32,
# batch 2) makes a gradient that one rounding moves by 10^4 x its scale, and
# a check stricter than eager's own reproducibility fails correct artifacts.
MAX_SPREAD = 1.0


def make_batches(parts, steps, seed):
    """Step 0 uses the spec's example batch; later steps permute its samples
    (along each tensor's batch dim, batch.py) so every step sees different
    data. Each batch is (input leaves, target leaves)."""
    g = torch.Generator().manual_seed(seed)
    x0, y0 = parts.inputs, parts.targets
    lay = parts.layout
    batches = [(x0, y0)]
    for _ in range(1, steps):
        perm = torch.randperm(lay.size, generator=g)
        batches.append(([x.index_select(d, perm) for x, d in zip(x0, lay.inputs)],
                        [y.index_select(d, perm) for y, d in zip(y0, lay.targets)]))
    return batches


def golden_target(k, i):
    """Target tensor i of golden step k: the first keeps version 1's name."""
    return f"golden/step{k}/target" + (str(i) if i else "")


def eager_copy(parts):
    """A deep copy of the user's model and optimizer, the optimizer on the
    copy's parameters: one deepcopy of both, so the memo maps each param
    group's tensors to the copy's (rebuilding the optimizer from .defaults
    breaks on 2.x, where AdamW's defaults hold an option its __init__ does
    not take)."""
    spec = parts.spec
    memo = {}
    model, opt = copy.deepcopy((spec.model, spec.optimizer), memo)
    # torch's Optimizer pickles only defaults, state and param_groups: a
    # user optimizer's own attributes come along here.
    for k, v in spec.optimizer.__dict__.items():
        if k not in opt.__dict__:
            opt.__dict__[k] = copy.deepcopy(v, memo)
    return model, opt


def _jitter(t, gen, roundings=1.0, compute=None):
    """t plus `roundings` roundings' worth of noise at its largest magnitude:
    roundings of `compute`, the dtype the step computes in (bfloat16 under
    autocast, whose roundings are what a reimplementation differs by), or
    of t's own dtype."""
    if not t.is_floating_point() or t.numel() == 0:
        return t
    eps = torch.finfo(compute or t.dtype).eps * roundings
    noise = torch.randn(t.shape, generator=gen, dtype=t.dtype)
    if compute is not None:
        # bfloat16 rounds each element at its own magnitude, and a sum of
        # rounded terms errs at the terms' size: noise relative to the
        # element, plus the tensor's RMS (which flips the sign of a
        # near-zero gradient as another summation order does; the largest
        # magnitude would swamp every small gradient).
        d = t.detach()
        rms = d.double().pow(2).mean().sqrt().to(d.dtype)
        return t + eps * (d.abs() + rms) * noise
    return t + eps * t.detach().abs().max() * noise


def _flip_near_zero(g, compute):
    """g with the sign of each element within one `compute` rounding (at the
    tensor's RMS) of zero flipped. A gradient that is a long sum cancelling
    to near zero (a norm's or a bias's, summed over tokens) errs by its
    terms' roundings, so any reimplementation may give it either sign, and an
    update that divides each element by its own gradient (Adam's first) then
    moves that element by the whole step. The random gradient noise flips
    such an element only now and then; this trial always does."""
    if not g.is_floating_point() or g.numel() == 0:
        return g
    d = g.detach()
    rms = d.double().pow(2).mean().sqrt()
    near = d.double().abs() <= torch.finfo(compute).eps * rms
    return torch.where(near, -g, g)


def _fan_in(p):
    """Terms in each dot product a weight enters (in x kh x kw of a conv,
    in of a linear layer); 1 for a vector (bias, norm scale)."""
    return p[0].numel() if p.dim() >= 2 else 1


def _state(parts, model, opt, step):
    """Every state tensor verify compares, by state name, as eager has it."""
    out = {n: t.detach().clone() for n, t in model.named_parameters()}
    out.update({n: t.detach().clone() for n, t in model.named_buffers()})
    out.update(parts.opt.state_from_torch(opt, dict(model.named_parameters())))
    out[ts_optim.STEP] = torch.tensor(float(step))
    return out


def compute_dtype(parts):
    """bfloat16 where the step computes in it: under autocast, or where the
    traced step holds bfloat16 values of its own (Muon's Newton-Schulz);
    else None (the state's own dtype). Calibration's noise and floor follow."""
    if capture.autocast_dtype(parts.spec) is not None or getattr(parts, "computes_bf16", False):
        return torch.bfloat16
    return None


def noise_kinds(parts):
    """The calibration's noise kinds: NOISE, and under bfloat16 compute the
    deterministic "signs" trial too."""
    return NOISE_BF16 if compute_dtype(parts) is not None else NOISE


def _run(parts, batches, seed, grads, noise=None, gen=None, reset=False):
    """_steps as the model's own code runs them, or (reset) with the
    tensors forward caches in plain attributes reset before every forward,
    as the compiled step computes them (caches.py)."""
    with contextlib.nullcontext() if reset else parts.caches.natural():
        return _steps(parts, batches, seed, grads, noise, gen)


def _steps(parts, batches, seed, grads, noise=None, gen=None):
    """The golden steps in eager PyTorch, then eval on step 0's batch.
    Returns {key: tensor} for every value verify compares:
      loss/K, grad/P (step 0, before clipping; when grads), after0/S (state
      after step 0) and delta/S (after0/S minus the start), state/S
      (final), eval/outputI, eval/sample_loss.
    noise "grads" or "params" adds _jitter there (drawn from gen)."""
    spec = parts.spec
    compute = compute_dtype(parts)
    model, opt = eager_copy(parts)
    model.train()
    if noise == "params":
        with torch.no_grad():
            for p in model.parameters():
                # A K-term dot product summed in another order differs by
                # about sqrt(K) roundings, so the forward's pre-activations
                # (and which side of a ReLU kink they land on) move about
                # as far as a reimplementation's do.
                # Under autocast this float32 noise flips some of the
                # bfloat16 copies' roundings by an ulp, as a product summed
                # in another order rounds an output an ulp apart now and
                # then: the same model serves.
                p.copy_(_jitter(p, gen, math.sqrt(_fan_in(p))))
    opt_params = [p for g in opt.param_groups for p in g["params"]]
    step0 = int(parts.opt_state[ts_optim.STEP])
    init = _state(parts, model, opt, step0)
    obs = {}
    for k, (xs, ys) in enumerate(batches):
        with rng.stream(torch.tensor(seed), torch.tensor(step0 + k)):
            opt.zero_grad()
            with parts.autocast():
                loss = spec.loss_fn(model(*parts.example.args(xs)), parts.example.target(ys))
            loss.backward()
        if grads and k == 0:
            named = dict(model.named_parameters())
            for n in parts.pnames:
                obs[f"grad/{n}"] = named[n].grad.detach().clone()
        if noise == "grads":
            for p in opt_params:
                if p.grad is not None:
                    p.grad.copy_(_jitter(p.grad, gen, compute=compute))
        elif noise == "signs":
            for p in opt_params:
                if p.grad is not None:
                    p.grad.copy_(_flip_near_zero(p.grad, compute))
        if parts.clip is not None:
            torch.nn.utils.clip_grad_norm_(opt_params, *parts.clip)
        opt.step()
        obs[f"loss/{k}"] = loss.detach().reshape(())
        if k == 0:
            # The first step's update, which verify checks against its own
            # scale (a state's scale would hide it).
            for n, t in _state(parts, model, opt, step0 + 1).items():
                obs[f"after0/{n}"] = t
                obs[f"delta/{n}"] = t.double() - init[n].double()
    for n, t in _state(parts, model, opt, step0 + len(batches)).items():
        obs[f"state/{n}"] = t

    model.eval()
    # The first eval batch: eval offset 0 (the C++ session counts eval
    # batches from 0).
    with torch.no_grad(), rng.stream(torch.tensor(seed), torch.tensor(0), rng.EVAL_KEY_BASE), \
            parts.autocast():
        xs, ys = batches[0]
        out = model(*parts.example.args(xs))
        sf = getattr(spec, "step_function", None)
        if sf is not None:  # a train_step function (step_fn.py): its loss or eval_fn's
            loss, leaves, structure, dims = sf.evaluate(out, parts.example.target(ys),
                                                        parts.layout)
        else:
            leaves, structure = pytree.flatten(out)
            dims = batch.per_sample_dims(leaves, parts.layout, structure.names)
            if dims is not None:  # per-sample losses of float32 outputs, as capture_eval
                leaves = capture.eval_outputs(spec, leaves)

        def sample(i):
            one = structure.build([o.narrow(d, i, 1) for o, d in zip(leaves, dims)])
            ts = [y.narrow(d, i, 1) for y, d in zip(ys, parts.layout.targets)]
            return spec.loss_fn(one, parts.example.target(ts))
        if sf is not None:
            obs["eval/batch_loss" if dims is None else "eval/sample_loss"] = loss
        elif dims is None:  # the batch's loss (capture.capture_eval)
            obs["eval/batch_loss"] = spec.loss_fn(out, parts.example.target(ys)).reshape(())
        else:
            obs["eval/sample_loss"] = torch.stack([sample(i) for i in range(parts.layout.size)])
    for i, o in enumerate(capture.eval_outputs(spec, leaves)):
        obs[f"eval/output{i}"] = o
    return obs


def _relative(a, b, scale=0.0):
    """max |a - b| over max(max |b|, scale), as verify measures it."""
    a, b = a.double(), b.double()
    if a.numel() == 0:
        return 0.0
    d = (a - b).abs()
    if not bool(torch.isfinite(d).all()):
        return MAX_SPREAD
    return float(d.max() / max(float(b.abs().max()), scale, 1e-12))


def calibrate(parts, batches, seed, grads, base, rounds):
    """{key: spread}: each compared value's largest difference, relative to
    its largest magnitude, over `rounds` runs of each NOISE kind."""
    spread = {k: 0.0 for k in base if not k.startswith("after0/")}
    # losses at the scale of the whole series, as verify compares them
    loss_scale = max(float(v.abs()) for k, v in base.items() if k.startswith("loss/"))
    for r in range(rounds):
        for i, kind in enumerate(noise_kinds(parts)):
            if kind == "signs" and r > 0:
                continue  # deterministic: one trial is all it has
            gen = torch.Generator().manual_seed(1000 * r + i)
            got = _run(parts, batches, seed, grads, kind, gen)
            for key in spread:
                scale = loss_scale if key.startswith("loss/") or \
                    key in ("eval/sample_loss", "eval/batch_loss") \
                    else 0.0
                spread[key] = max(spread[key], _relative(got[key], base[key], scale))
    return spread


def record(parts, steps=3, seed=0, grads=False, rounds=ROUNDS):
    """K eager steps, and (rounds > 0) verify's calibration.
    grads: also record step 0's gradients (before clipping) as
    golden/grad/<param>."""
    batches = make_batches(parts, steps, seed)
    obs = _run(parts, batches, seed, grads)
    if parts.caches.changing:
        # An attribute forward writes changed between batches: state carried
        # across them if resetting it (as the compiled step does) changes
        # the steps, else only written (an attention map kept for plotting).
        again = _run(parts, batches, seed, grads, reset=True)
        if any(not torch.equal(again[k], v) for k, v in obs.items()
               if k.startswith(("loss/", "state/"))):
            raise parts.caches.carried_state_error()
    tensors = {}
    for k, (xs, ys) in enumerate(batches):
        for i, x in enumerate(xs):
            tensors[f"golden/step{k}/input{i}"] = x
        for i, y in enumerate(ys):
            tensors[golden_target(k, i)] = y
    # float32 whatever the model's dtype: train_step returns the loss as a float.
    tensors["golden/loss"] = torch.stack([obs[f"loss/{k}"] for k in range(steps)]).float()
    for key, t in obs.items():
        kind, name = key.split("/", 1)
        if kind in ("grad", "after0"):  # delta/ is verify's to compute
            tensors[f"golden/{kind}/{name}"] = t
        elif kind == "state":
            tensors[f"golden/final/{name}"] = t
        elif kind == "eval":
            tensors[f"golden/eval/{name}"] = t
    meta = {"steps": steps, "seed": seed, "offset": int(parts.opt_state[ts_optim.STEP]),
            "lr": parts.opt.base_lr}
    if rounds > 0:
        spread = calibrate(parts, batches, seed, grads, obs, rounds)
        bf16 = compute_dtype(parts) is not None
        meta["calibration"] = {"factor": FACTOR, "floor": FLOOR_BF16 if bf16 else FLOOR,
                               "rounds": rounds, "noise": list(noise_kinds(parts)), "spread": spread}
        if bf16:
            meta["calibration"]["compute"] = "bfloat16"
    return meta, tensors
