"""The golden trace: K training steps of *eager* PyTorch with the user's real
torch.optim optimizer and the trainstep RNG, recorded for `trainstep verify`.

It is an independent oracle for the captured graph: eager autograd and
torch.optim, not our functional rewrite, produce the expected numbers.
"""
import copy

import torch

from . import optim as ts_optim
from . import rng


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


def record(parts, steps=3, seed=0):
    spec = parts.spec
    model = copy.deepcopy(spec.model)
    model.train()
    group = {k: v for k, v in spec.optimizer.param_groups[0].items() if k != "params"}
    opt = type(spec.optimizer)(model.parameters(), **group)
    if spec.optimizer.state:
        opt.load_state_dict(copy.deepcopy(spec.optimizer.state_dict()))
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
        opt.step()
        losses.append(loss.detach().reshape(()))
    tensors["golden/loss"] = torch.stack(losses)
    final = {n: t.detach() for n, t in model.named_parameters()}
    final.update({n: t.detach() for n, t in model.named_buffers()})
    pnames = [n for n, p in model.named_parameters() if p.requires_grad]
    ostate = parts.opt.state_from_torch(opt, pnames)
    ostate[ts_optim.STEP] = torch.tensor(float(step0 + steps))
    final.update(ostate)
    for n, t in final.items():
        tensors[f"golden/final/{n}"] = t.clone()

    # Eval on step 0's batch with the trained weights, per-sample loss.
    model.eval()
    with torch.no_grad():
        xs, y = batches[0]
        out = model(*xs)
        per = torch.stack([spec.loss_fn(out[i:i + 1], y[i:i + 1]) for i in range(y.shape[0])])
    tensors["golden/eval/output0"] = out
    tensors["golden/eval/sample_loss"] = per
    meta = {"steps": steps, "seed": seed, "offset": step0, "lr": parts.opt.base_lr}
    return meta, tensors
