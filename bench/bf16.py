#!/usr/bin/env python3
"""bfloat16 autocast against float32, eager autocast and torch.compile of
the autocast step, measured alternately in one run (docs/bf16.md).

    bench/bf16.py [SPEC.py ...] [--threads 1 2] [--steps N] [--rounds R]

For each spec: exports it twice (float32, and --autocast bfloat16), then
each round times N steps of: trainstep float32, trainstep bfloat16 (both
`trainstep bench`), eager with the forward and loss under
torch.autocast("cpu", bfloat16), and torch.compile of that same step
(when this torch has it). Prints the medians of the per-round medians, the
ratios, the oneDNN implementations the bfloat16 products ran on and how
many convolution backward shapes took trainstep's bf16 Winograd (from
`bench --profile`). Run it with the project's torch 2.x venv
(scripts/torch2-env.sh) for the torch.compile column.
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from benchlib import reexec_with_warm_heap, step_times, trainstep_bench  # noqa: E402

reexec_with_warm_heap()

import torch  # noqa: E402

SPECS = [os.path.join(ROOT, "examples", n, "spec.py") for n in ("mnist", "resnet", "transformer")]


def autocast_step(spec):
    """The spec's eager step with the forward and loss under autocast."""
    model, opt, loss_fn = spec.model, spec.optimizer, spec.loss_fn
    xs, y = list(spec.example_inputs), spec.example_target
    model.train()

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model(*xs), y)
        loss.backward()
        opt.step()
        return loss
    return step


def compiled_step(spec):
    """torch.compile of the autocast forward+loss+backward; the optimizer
    steps eagerly, as torch.compile users write it."""
    if not hasattr(torch, "compile"):
        return None
    model, opt, loss_fn = spec.model, spec.optimizer, spec.loss_fn
    xs, y = list(spec.example_inputs), spec.example_target
    model.train()

    @torch.compile
    def fwd_bwd():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model(*xs), y)
        loss.backward()
        return loss

    def step():
        opt.zero_grad()
        loss = fwd_bwd()
        opt.step()
        return loss
    return step


def ms(step, n):
    step()  # first call: compile / warm
    return statistics.median(step_times(step, n)) * 1e3


def impls(profile_out):
    """oneDNN implementations named in bench --profile's kernel lines."""
    return sorted(set(re.findall(r"onednn (\S+)", profile_out)))


def winograd_parts(profile_out):
    """(picked, timed): bfloat16 convolution backward parts that timed
    trainstep's Winograd against oneDNN, and how many it won."""
    lines = [l for l in profile_out.splitlines()
             if re.match(r"\s+conv_(dgrad|wgrad) bf16 ", l) and "winograd " in l]
    won = [l for l in lines if re.search(r"node[s]?\s+winograd \(", l)]
    return len(won), len(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("specs", nargs="*", default=SPECS)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    from trainstep import exporter
    tmp = tempfile.mkdtemp(prefix="bf16bench")
    print(f"torch {torch.__version__}")
    for path in a.specs:
        name = os.path.basename(os.path.dirname(path))
        f32, bf16 = os.path.join(tmp, f"{name}_f32.tstep"), os.path.join(tmp, f"{name}_bf16.tstep")
        exporter.export(path, f32, golden_steps=1, calibration_rounds=0)
        exporter.export(path, bf16, golden_steps=1, calibration_rounds=0, autocast=torch.bfloat16)
        for t in a.threads:
            torch.set_num_threads(t)
            spec = exporter.load_spec(path)
            eager = autocast_step(spec)
            comp = compiled_step(exporter.load_spec(path))
            got = {"ts_f32": [], "ts_bf16": [], "eager_bf16": [], "compile_bf16": []}
            for _ in range(a.rounds):
                got["ts_f32"].append(trainstep_bench(f32, a.steps, t)[0])
                got["ts_bf16"].append(trainstep_bench(bf16, a.steps, t)[0])
                got["eager_bf16"].append(ms(eager, a.steps))
                if comp is not None:
                    got["compile_bf16"].append(ms(comp, a.steps))
            med = {k: statistics.median(v) for k, v in got.items() if v}
            prof = trainstep_bench(bf16, 3, t, profile=True)[2]
            line = " ".join(f"{k}={v:.1f}ms" for k, v in med.items())
            print(f"{name} threads={t}: {line}")
            print(f"  bf16 vs f32: {med['ts_f32'] / med['ts_bf16']:.2f}x; "
                  f"vs eager autocast: {med['eager_bf16'] / med['ts_bf16']:.2f}x"
                  + (f"; vs torch.compile autocast: {med['compile_bf16'] / med['ts_bf16']:.2f}x"
                     if "compile_bf16" in med else "; torch.compile: not in this torch"))
            print(f"  oneDNN bf16 implementations: {', '.join(impls(prof)) or 'none reported'}")
            won, timed = winograd_parts(prof)
            if timed:
                print(f"  bf16 Winograd (convolution backward): picked for {won} of the {timed} "
                      "shapes timed against oneDNN")


if __name__ == "__main__":
    main()
