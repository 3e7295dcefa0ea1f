"""PyTorch state dicts <-> trainstep checkpoints, for one artifact.

`trainstep import-checkpoint ART TORCH.pt --out CKPT` reads a file written by
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
("optimizer" may be left out: the optimizer then starts fresh) and writes a
trainstep checkpoint that `trainstep train ART --resume CKPT` continues from.

`trainstep export-checkpoint ART CKPT --out TORCH.pt` writes the same kind of
file back: `model.load_state_dict(d["model"])` and
`optimizer.load_state_dict(d["optimizer"])` take it, with the optimizer's
state keyed by parameter index across its param groups and each `step` as
torch 1.13 keeps it (a float32 0-d tensor for Adam, AdamW and Adagrad, an
int for Adadelta and RMSprop, none for SGD).

The optimizer's hyper-parameters are constants of the captured step, so an
imported optimizer must have the artifact's groups and hyper-parameters;
only the LR may differ (it is a runtime input; group LRs must keep the
artifact's ratios). trainstep keeps one step count for all parameters.
"""
import argparse
import functools
import json
import math
import sys
import warnings

import torch

from . import cli_errors, safe_pickle, safetensors_io
from .checkpoint import FORMAT
from .optim import STEP, Optimizer, UnsupportedOptimizer, state_name
from .traced_optim import TracedOptimizer

CHECKPOINT_VERSION = "1"
# Hyper-parameters that do not change the update (dispatch only).
_IGNORED = {"foreach", "differentiable", "capturable", "fused"}


class InteropError(Exception):
    pass


def _program(artifact):
    _, meta = safetensors_io.load(artifact)
    if meta.get("format") != "trainstep":
        raise InteropError(f"{artifact}: not a trainstep artifact")
    safetensors_io.warn_if_unchecked(artifact, meta)
    return json.loads(meta["program"])


def _optimizer(program, artifact):
    try:
        j = program["optimizer"]
        if j.get("traced"):
            tensors, _ = safetensors_io.load(artifact)
            initial = {k[len("state/"):]: v for k, v in tensors.items()
                       if k.startswith("state/optim/")}
            return TracedOptimizer.from_json(j, initial)
        return Optimizer.from_json(j)
    except UnsupportedOptimizer as e:
        raise InteropError(f"{artifact}: {e}")


def _state_specs(program):
    return {s["name"]: s for s in program["state"]}


def _check_tensor(where, t, spec):
    dtype = str(t.dtype).replace("torch.", "")
    if dtype != spec["dtype"] or list(t.shape) != spec["shape"]:
        raise InteropError(f"{where} is {dtype}{list(t.shape)}, the artifact's is "
                           f"{spec['dtype']}{spec['shape']}")


def _model_state(program, sd, src):
    specs = _state_specs(program)
    aliases = program.get("aliases", {})
    out = {}
    for name, spec in specs.items():
        if spec["kind"] == "optim":
            continue
        if name not in sd:
            raise InteropError(f"{src}: the model state_dict has no '{name}'")
        if not isinstance(sd[name], torch.Tensor):
            raise InteropError(f"{src}: model '{name}' is a {type(sd[name]).__name__}, "
                               "not a tensor")
        _check_tensor(f"{src}: model '{name}'", sd[name], spec)
        out[name] = sd[name].detach().clone().contiguous()
    for name, t in sd.items():
        if name in out:
            continue
        if name not in aliases:
            raise InteropError(f"{src}: the model state_dict has '{name}', which the artifact "
                               "does not know (a different model?)")
        if not torch.equal(t, sd[aliases[name]]):
            raise InteropError(f"{src}: '{name}' is tied to '{aliases[name]}' in the artifact "
                               "but holds different values")
    return out


def _check_groups(opt, groups, src):
    if len(groups) != len(opt.groups):
        raise InteropError(f"{src}: the optimizer has {len(groups)} param group(s), the "
                           f"artifact's has {len(opt.groups)}")
    lr0 = float(groups[0]["lr"])
    for i, (g, mine) in enumerate(zip(groups, opt.groups)):
        if len(g["params"]) != len(mine.params):
            raise InteropError(f"{src}: param group {i} has {len(g['params'])} parameters, the "
                               f"artifact's has {len(mine.params)}")
        for k, v in _hyper(mine).items():
            if k in _IGNORED or k not in g:
                continue
            theirs = tuple(g[k]) if isinstance(g[k], list) else g[k]
            if theirs != v:
                raise InteropError(
                    f"{src}: param group {i}: {k}={theirs!r}, but the artifact was exported "
                    f"with {k}={v!r} (hyper-parameters are constants of the captured step: "
                    "re-export the spec with them)")
        scale = float(g["lr"]) / lr0 if lr0 else 1.0
        if not math.isclose(scale, mine.lr_scale, rel_tol=1e-9):
            raise InteropError(
                f"{src}: param group {i}'s LR is {scale:g} x group 0's, the artifact's is "
                f"{mine.lr_scale:g} x (group LR ratios are fixed at export)")


def _hyper(group):
    """A group's hyper-parameters, constants of the captured step."""
    if hasattr(group, "rule"):
        return group.rule.h
    return {k: v for k, v in group.options.items() if k not in ("lr", "initial_lr")
            and isinstance(v, (bool, int, float, str, tuple))}


def _load_torch_file(path):
    """torch.load without running code from the file (safe_pickle)."""
    try:
        return safe_pickle.load(path)
    except safe_pickle.TorchScriptFile:
        raise InteropError(f"{path}: is a TorchScript archive (torch.jit.save), which holds "
                           "code; trainstep reads only torch.save'd state dicts") from None
    except OSError as e:
        raise InteropError(f"{path}: {e.strerror or e}") from None
    except Exception as e:  # torch raises many kinds of errors for bad files
        refused = safe_pickle.refusal(e)
        if refused:
            raise InteropError(
                f"{path}: refused to load: the pickle would build {refused.describe()}; "
                "trainstep loads only tensors and plain containers from PyTorch files "
                "(torch.save of state_dicts)") from None
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise InteropError(f"{path}: cannot read it as a torch.save file: {first}") from None


def import_checkpoint(artifact, torch_file, out, seed=0, step=None):
    """Writes a trainstep checkpoint from torch.save'd state dicts."""
    program = _program(artifact)
    d = _load_torch_file(torch_file)
    if not isinstance(d, dict) or not isinstance(d.get("model"), dict):
        raise InteropError(f"{torch_file}: expected a dict with 'model' (model.state_dict()) "
                           "and optionally 'optimizer' (optimizer.state_dict())")
    tensors = _model_state(program, d["model"], torch_file)
    opt = _optimizer(program, artifact)
    params = {n: tensors[n] for g in opt.groups for n in g.params}
    osd = d.get("optimizer")
    if osd is None:
        ostate = opt.init_state(params)
        lr = base_lr = opt.base_lr
    else:
        if not isinstance(osd, dict) or "state" not in osd or "param_groups" not in osd:
            raise InteropError(f"{torch_file}: 'optimizer' is not an optimizer.state_dict()")
        _check_groups(opt, osd["param_groups"], torch_file)
        try:
            ostate = opt.state_from([g["params"] for g in osd["param_groups"]], osd["state"],
                                    params, osd["param_groups"])
        except UnsupportedOptimizer as e:
            raise InteropError(f"{torch_file}: {e}")
        g0 = osd["param_groups"][0]
        lr = float(g0["lr"])
        base_lr = float(g0.get("initial_lr", lr))
    specs = _state_specs(program)
    for n, t in ostate.items():
        if n not in specs:
            raise InteropError(f"{artifact}: has no optimizer state '{n}' (re-export it)")
        _check_tensor(f"optimizer state '{n}'", t, specs[n])
    missing = [n for n, s in specs.items() if s["kind"] == "optim" and n not in ostate]
    if missing:
        raise InteropError(f"{artifact}: optimizer state {missing} not filled (re-export it)")
    tensors.update(ostate)
    steps = int(step) if step is not None else int(ostate[STEP])
    meta = {"format": FORMAT, "format_version": CHECKPOINT_VERSION, "model": program["name"],
            "step": str(steps), "seed": str(int(seed)), "lr": repr(lr), "epoch": "0",
            "base_lr": repr(base_lr), "lr_schedule": "constant", "lr_schedule_unit": "epoch",
            "data_position": "0"}
    for alias, target in program.get("aliases", {}).items():
        tensors[alias] = tensors[target]
    safetensors_io.save(out, tensors, meta)
    return meta


def _torch_step(opt, step):
    """`step` as this torch's optimizer keeps it: torch 1.13's Adadelta and
    RMSprop count in a Python int, every other (and 2.x's) in a float32
    tensor, which is what their load_state_dict and step expect."""
    if opt.torch_step == "tensor" or _steps_in_tensor(opt.name):
        return torch.tensor(step, dtype=torch.float32)
    return int(step)


@functools.lru_cache(maxsize=None)
def _steps_in_tensor(name):
    p = torch.nn.Parameter(torch.zeros(1))
    o = getattr(torch.optim, name)([p])  # the optimizers that count steps all have a default lr
    p.grad = torch.zeros(1)
    o.step()
    return isinstance(o.state[p]["step"], torch.Tensor)


def export_checkpoint(artifact, ckpt, out):
    """Writes {"model": state_dict, "optimizer": optimizer state_dict} for torch.save."""
    program = _program(artifact)
    tensors, meta = safetensors_io.load(ckpt)
    if meta.get("format") != FORMAT:
        raise InteropError(f"{ckpt}: not a trainstep checkpoint")
    safetensors_io.warn_if_unchecked(ckpt, meta)
    specs = _state_specs(program)
    for n, s in specs.items():
        if n not in tensors:
            raise InteropError(f"{ckpt}: has no '{n}' (a checkpoint of another artifact?)")
        _check_tensor(f"{ckpt}: '{n}'", tensors[n], s)
    model = {n: tensors[n] for n, s in specs.items() if s["kind"] != "optim"}
    for alias, target in program.get("aliases", {}).items():
        model[alias] = model[target]
    opt = _optimizer(program, artifact)
    step = float(tensors[STEP][()]) if STEP in tensors else 0.0
    lr = float(meta.get("lr", opt.base_lr))
    base_lr = float(meta.get("base_lr", lr))
    state, groups, index = {}, [], 0
    for gi, g in enumerate(opt.groups):
        ids = []
        for n in g.params:
            st = _param_state(opt, g, n, tensors, step)
            if st is not None:
                state[index] = st
            ids.append(index)
            index += 1
        options = dict(g.options)
        # The group's own LR when the runtime LR is the artifact's (exact),
        # else the runtime LR times the group's ratio.
        options["lr"] = options["lr"] if lr == opt.base_lr else lr * g.lr_scale
        if "initial_lr" in options:
            options["initial_lr"] = options["initial_lr"] if base_lr == opt.base_lr \
                else base_lr * g.lr_scale
        if getattr(opt, "traced", False):  # the numbers step() keeps in the group
            options.update(opt.torch_group_state(tensors, gi, step))
        groups.append({**options, "params": ids})
    d = {"model": model, "optimizer": {"state": state, "param_groups": groups}}
    torch.save(d, out)
    return d


def _param_state(opt, g, n, tensors, step):
    """torch's state of one parameter, or None where torch keeps none."""
    if getattr(opt, "traced", False):
        if n not in g.updated or (step == 0 and not opt.state_at_start):
            return None
        return opt.torch_state(tensors, n)
    rule = g.rule
    if n not in g.updated:
        # Never updated: torch has no state, except Adagrad's, made in __init__.
        if opt.name == "Adagrad":
            return {"step": _torch_step(opt, 0.0), **rule.init_param(tensors[n])}
        return None
    if step == 0 and opt.name != "Adagrad":
        return None  # torch creates state on the first step
    st = {}
    if opt.torch_step is not None:
        st["step"] = _torch_step(opt, step)
    if opt.name == "SGD" and not rule.keys:
        st["momentum_buffer"] = None  # torch stores None without momentum
    for k in rule.keys:
        st[k] = tensors[state_name(n, k)].clone()
    return st


def _notice(message, category, *_, **__):
    """Warnings as one line each: 'notice: ...' for files without checksums."""
    prefix = "notice" if issubclass(category, safetensors_io.UncheckedFileWarning) else "warning"
    print(f"{prefix}: {message}", file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="trainstep torch-checkpoint")
    sub = ap.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import")
    imp.add_argument("artifact")
    imp.add_argument("torch_file")
    imp.add_argument("--out", required=True)
    imp.add_argument("--seed", type=int, default=0)
    imp.add_argument("--step", type=int, default=None)
    exp = sub.add_parser("export")
    exp.add_argument("artifact")
    exp.add_argument("checkpoint")
    exp.add_argument("--out", required=True)
    for p in (imp, exp):
        p.add_argument("--debug", action="store_true",
                       help="on an error, also print the full Python traceback")
    a = ap.parse_args(argv)

    def body():
        warnings.simplefilter("always", safetensors_io.UncheckedFileWarning)
        warnings.showwarning = _notice
        cli_errors.check_output(a.out)
        if a.cmd == "import":
            meta = import_checkpoint(a.artifact, a.torch_file, a.out, a.seed, a.step)
            print(f"wrote {a.out}: step {meta['step']}, lr {meta['lr']}")
        else:
            export_checkpoint(a.artifact, a.checkpoint, a.out)
            print(f"wrote {a.out}")
        return 0
    where = a.torch_file if a.cmd == "import" else a.checkpoint
    return cli_errors.run(f"trainstep: {a.cmd}-checkpoint", body, where, debug=a.debug,
                          known=(InteropError, ValueError), known_name_file=True)


if __name__ == "__main__":
    sys.exit(main())
