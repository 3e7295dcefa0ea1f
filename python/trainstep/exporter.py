"""`trainstep export SPEC.py --out NAME.tstep`: spec -> artifact.

Run by the C++ CLI with an interpreter that can import torch; it can also be
run directly as `python3 -m trainstep export` (trainstep/__main__.py).
"""
import argparse
import collections
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys

import torch

from . import FORMAT_VERSION, TrainSpec
from . import capture, checks, cli_errors, golden, provenance, safetensors_io, versions
from .optim import UnsupportedOptimizer


class ExportError(Exception):
    pass


class BinaryError(ExportError, cli_errors.SetupError):
    """The trainstep binary is missing, broken or of another version."""


def load_spec(path):
    if not os.path.exists(path):
        raise ExportError(f"{path}: no such file")
    mod_name = "trainstep_spec_" + os.path.splitext(os.path.basename(path))[0]
    s = importlib.util.spec_from_file_location(mod_name, path)
    if s is None:  # importlib knows no loader for the name (not NAME.py)
        raise ExportError(f"{path}: not a Python file (expected SPEC.py)")
    mod = importlib.util.module_from_spec(s)
    # The spec's folder is importable while it loads and builds; the spec
    # may put its own entries on sys.path meanwhile, so this one entry is
    # taken off, not whatever is first by then.
    here = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, here)
    try:
        s.loader.exec_module(mod)
        if not hasattr(mod, "build"):
            raise ExportError(f"{path}: defines no build() function")
        spec = mod.build()
    finally:
        sys.path.remove(here)
    if not isinstance(spec, TrainSpec):
        raise ExportError(f"{path}: build() must return trainstep.TrainSpec, got "
                          f"{type(spec).__name__}")
    if not isinstance(spec.example_inputs, (list, tuple)):
        spec.example_inputs = (spec.example_inputs,)
    return spec


def find_binary():
    """The trainstep binary the export asks for its op list: $TRAINSTEP_BIN
    (the binary sets it for the exporter it runs), else `trainstep` on PATH,
    else a source checkout's own build/trainstep next to this package."""
    binary = os.environ.get("TRAINSTEP_BIN") or shutil.which("trainstep")
    if binary:
        return binary
    cand = os.path.join(versions.HERE, "..", "..", "build", "trainstep")
    if os.path.exists(cand):
        return os.path.normpath(cand)
    raise BinaryError("cannot find the trainstep binary, which checks that it runs every op "
                      "of the export: put it on PATH or set TRAINSTEP_BIN=/path/to/trainstep")


def supported_ops(binary=None):
    """The runtime's op list, from the runtime itself (`trainstep ops
    --json`), which must be of this exporter's version (versions.py)."""
    binary = binary or find_binary()
    try:
        out = subprocess.run([binary, "ops", "--json"], capture_output=True, text=True)
    except OSError as e:
        raise BinaryError(f"cannot run the trainstep binary {binary}: {e.strerror}")
    try:
        listing = json.loads(out.stdout) if out.returncode == 0 else None
    except ValueError:
        listing = None
    if not isinstance(listing, dict) or not isinstance(listing.get("ops"), list):
        said = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
        raise BinaryError(f"{binary} is not a working trainstep binary: `ops --json` gave no "
                          f"op list ({said})")
    msg = versions.mismatch(binary, listing.get("trainstep_version"), listing.get("version"))
    if msg:
        raise BinaryError(msg)
    return {op["name"] for op in listing["ops"]}


def check_ops(functions, supported):
    """Refuses ops the runtime lacks, naming each one's node count per
    function and, where the capture recorded it, the module and source line
    of its first node."""
    missing = collections.OrderedDict()
    for fname, fn in functions.items():
        for node in fn["nodes"]:
            if node["op"] not in supported:
                missing.setdefault(node["op"], []).append((fname, node))
    if not missing:
        return
    lines = []
    for op, uses in missing.items():
        per_fn = collections.Counter(f for f, _ in uses)
        counts = ", ".join(f"{f} {k}" for f, k in sorted(per_fn.items()))
        src = next((n["source"] for _, n in uses if isinstance(n.get("source"), dict)), None)
        where = (f"first from {provenance.describe(src)}" if src else
                 "no source recorded (backward, loss or optimizer nodes)")
        lines.append(f"  {op}: {len(uses)} node(s) ({counts}); {where}")
    raise ExportError("unsupported op(s) in the captured step (see docs/ops.md for the "
                      "supported list):\n" + "\n".join(lines))


def trace_tensors(parts, train, gmeta, gtensors):
    """"trace/train_step/<value>": the captured train graph's value at every
    node, run in torch on golden step 0's inputs (docs/format.md)."""
    state = parts.state()
    scalars = {"lr": torch.tensor(gmeta["lr"], dtype=capture.lr_dtype(parts.params, parts.opt)),
               "rng_seed": torch.tensor(gmeta["seed"], dtype=torch.int64),
               "rng_offset": torch.tensor(gmeta["offset"], dtype=torch.int64)}
    flat = []
    for p in train.signature.inputs:
        if p["role"] == "state":
            flat.append(state[p["state"]][1])
        elif p["role"] == "input":
            flat.append(gtensors[f"golden/step0/input{p['index']}"])
        elif p["role"] == "target":
            flat.append(gtensors[golden.golden_target(0, p["index"])])
        else:
            flat.append(scalars[p["role"]])
    from .serialize import node_values
    return {f"trace/train_step/{k}": v for k, v in node_values(train, flat).items()}


def export(spec_path, out_path, golden_steps=None, seed=0, ops=None, grads=None,
           trace_values=False, calibration_rounds=golden.ROUNDS, autocast=None):
    if ops is None:  # first: a missing or mismatched binary fails before the work
        ops = supported_ops()
    spec = load_spec(spec_path)
    if autocast is not None:  # --autocast: over what the spec says
        spec.autocast = autocast
    return export_spec(spec, out_path, golden_steps, seed, ops, grads, trace_values,
                       calibration_rounds, spec_path)


def export_spec(spec, out_path, golden_steps=None, seed=0, ops=None, grads=None,
                trace_values=False, calibration_rounds=golden.ROUNDS, spec_path=None):
    """A TrainSpec -> the artifact at out_path; returns the program JSON."""
    if ops is None:
        ops = supported_ops()
    checks.check_spec(spec, spec_path)
    try:
        parts = capture.StepParts(spec)
    except UnsupportedOptimizer as e:
        raise ExportError(str(e))
    grads = spec.export_grads if grads is None else grads
    from .serialize import grads_apart, serialize_function
    train = capture.capture_train(parts)
    functions = {"train_step": grads_apart(serialize_function(train)),
                 "eval_step": serialize_function(capture.capture_eval(parts))}
    if grads:
        functions["grad_step"] = serialize_function(capture.capture_grad(parts))
        functions["apply_step"] = serialize_function(capture.capture_apply(parts))
    check_ops(functions, ops)
    # A step with bfloat16 values of its own (an optimizer that computes in
    # it) is calibrated on bfloat16's noise, as an autocast one is.
    parts.computes_bf16 = any(t and t.get("dtype") == "bfloat16"
                              for n in functions["train_step"]["nodes"]
                              for t in n.get("types") or [])

    steps = golden_steps if golden_steps is not None else spec.golden_steps
    gmeta, gtensors = golden.record(parts, steps=steps, seed=seed, grads=grads,
                                    rounds=calibration_rounds)
    state = parts.state()
    program = {
        "format": "trainstep",
        "version": FORMAT_VERSION,
        "name": spec.name or type(spec.model).__name__,
        "batch_size": parts.layout.size,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "optimizer": parts.opt.to_json(),
        "state": [{"name": n, "kind": k, **capture.tensor_meta(t)} for n, (k, t) in state.items()],
        "functions": functions,
        "golden": gmeta,
    }
    if capture.autocast_dtype(spec) is not None:
        program["autocast"] = "bfloat16"
    if parts.aliases:
        program["aliases"] = parts.aliases
    if parts.clip is not None:
        program["clip_grad_norm"] = {"max_norm": parts.clip[0],
                                     "norm_type": capture.json_float(parts.clip[1])}
    tensors = {f"state/{n}": t for n, (k, t) in state.items()}
    tensors.update(gtensors)
    if trace_values:
        tensors.update(trace_tensors(parts, train, gmeta, gtensors))
        gmeta["trace"] = {"function": "train_step", "step": 0}
    metadata = {"format": "trainstep", "format_version": str(FORMAT_VERSION),
                "program": json.dumps(program, separators=(",", ":"))}
    safetensors_io.save(out_path, tensors, metadata)
    return program


def eval_kind(program):
    """What the artifact's eval step reports about the loss."""
    outs = program["functions"]["eval_step"].get("outputs", [])
    if any(o.get("role") == "batch_loss" for o in outs):
        return ("the batch's loss (an output has no batch dim, as a loss the model returns "
                "or an output flattened over (seq, batch) with its target: evaluation "
                "averages whole batches)")
    return "per-sample loss"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="trainstep export")
    ap.add_argument("spec")
    ap.add_argument("--out", required=True)
    ap.add_argument("--golden-steps", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grads", action="store_true",
                    help="also export grad_step and apply_step traced, with step 0's "
                         "eager gradients for verify (without, the runtime cuts them from "
                         "train_step)")
    ap.add_argument("--trace-values", action="store_true",
                    help="record every train_step node's eager value on golden step 0 (verify --trace)")
    ap.add_argument("--calibration-rounds", type=int, default=golden.ROUNDS, metavar="N",
                    help="eager reruns of the golden steps with one rounding of noise on the "
                         f"gradients and on the parameters, N of each (default {golden.ROUNDS}), "
                         "whose spread sets verify's tolerance per value; 0: no calibration "
                         "(verify then uses its fixed default)")
    ap.add_argument("--autocast", choices=["bfloat16"], default=None,
                    help="run the forward and the loss under torch.autocast('cpu', "
                         "dtype=torch.bfloat16), as TrainSpec(autocast=...) does (docs/bf16.md)")
    ap.add_argument("--debug", action="store_true",
                    help="on an error, also print the full Python traceback")
    a = ap.parse_args(argv)

    def body():
        cli_errors.check_output(a.out)
        if a.calibration_rounds < 0:
            raise ExportError("--calibration-rounds must be 0 or more")
        program = export(a.spec, a.out, a.golden_steps, a.seed, grads=a.grads or None,
                         trace_values=a.trace_values, calibration_rounds=a.calibration_rounds,
                         autocast=torch.bfloat16 if a.autocast else None)
        hist = collections.Counter(n["op"] for n in program["functions"]["train_step"]["nodes"])
        print(f"exported {a.out}: {program['name']}, train_step {sum(hist.values())} nodes, "
              f"{len(hist)} distinct ops, {len(program['state'])} state tensors; "
              f"eval: {eval_kind(program)}")
        return 0
    return cli_errors.run("trainstep export", body, a.spec, debug=a.debug,
                          known=(ExportError, capture.CaptureError), user_file=a.spec)


if __name__ == "__main__":
    sys.exit(main())
