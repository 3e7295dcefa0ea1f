"""The golden trace: K training steps of *eager* PyTorch with the user's real
torch.optim optimizer and the trainstep RNG, recorded for `trainstep verify`.

It is an independent oracle for the captured graph: eager autograd and
torch.optim, not our functional rewrite, produce the expected numbers.
"""
import copy

import torch

from . import optim as ts_optim
from . import pytree, rng


def make_batches(parts, steps, seed):
    """Step 0 uses the spec's example batch; later steps permute its rows so
    every step sees different data."""
    g = torch.Generator().manual_seed(seed)
    x0, y0 = parts.inputs, parts.target
    batches = [(x0, y0)]
    for _ in range(1, steps):
        perm = torch.randperm(y0.shape[0], generator=g)
        batches.append(([x[perm] for x in x0], y0[perm]))
    return batches


def eager_copy(parts):
    """A deep copy of the user's model and optimizer, the optimizer on the
    copy's parameters: one deepcopy of both, so the memo maps each param
    group's tensors to the copy's (rebuilding the optimizer from .defaults
    breaks on 2.x, where AdamW's defaults hold an option its __init__ does
    not take)."""
    spec = parts.spec
    return copy.deepcopy((spec.model, spec.optimizer))


def record(parts, steps=3, seed=0, grads=False):
    """K eager steps. grads: also record step 0's gradients (before
    clipping) as golden/grad/<param>."""
    spec = parts.spec
    model, opt = eager_copy(parts)
    model.train()
    opt_params = [p for g in opt.param_groups for p in g["params"]]
    step0 = int(parts.opt_state[ts_optim.STEP])
    batches = make_batches(parts, steps, seed)
    tensors, losses = {}, []
    for k, (xs, y) in enumerate(batches):
        for i, x in enumerate(xs):
            tensors[f"golden/step{k}/input{i}"] = x
        tensors[f"golden/step{k}/target"] = y
        with rng.stream(torch.tensor(seed), torch.tensor(step0 + k)):
            opt.zero_grad()
            loss = spec.loss_fn(model(*xs), y)
            loss.backward()
        if grads and k == 0:
            named = dict(model.named_parameters())
            for n in parts.pnames:
                tensors[f"golden/grad/{n}"] = named[n].grad.detach().clone()
        if parts.clip is not None:
            torch.nn.utils.clip_grad_norm_(opt_params, *parts.clip)
        opt.step()
        losses.append(loss.detach().reshape(()))
    tensors["golden/loss"] = torch.stack(losses)
    final = {n: t.detach() for n, t in model.named_parameters()}
    final.update({n: t.detach() for n, t in model.named_buffers()})
    ostate = parts.opt.state_from_torch(opt, dict(model.named_parameters()))
    ostate[ts_optim.STEP] = torch.tensor(float(step0 + steps))
    final.update(ostate)
    for n, t in final.items():
        tensors[f"golden/final/{n}"] = t.clone()

    # Eval on step 0's batch with the trained weights, per-sample loss.
    model.eval()
    with torch.no_grad():
        xs, y = batches[0]
        out = model(*xs)
        leaves, structure = pytree.flatten(out)
        per = torch.stack([spec.loss_fn(structure.build([o[i:i + 1] for o in leaves]), y[i:i + 1])
                           for i in range(y.shape[0])])
    for i, o in enumerate(leaves):
        tensors[f"golden/eval/output{i}"] = o
    tensors["golden/eval/sample_loss"] = per
    meta = {"steps": steps, "seed": seed, "offset": step0, "lr": parts.opt.base_lr}
    return meta, tensors
