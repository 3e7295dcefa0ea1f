"""How far eager PyTorch moves from itself under rounding-sized noise: the
spread that `trainstep export` records to calibrate verify's tolerance
(python/trainstep/golden.py), printed per value for a spec, worst last.

The golden steps are rerun with the dtype's epsilon, relative to each
tensor's largest magnitude, added to every gradient before each optimizer
step, or sqrt(fan-in) times that to the initial parameters (so the forward
pass differs as a reordered sum would, and ReLU / max-pool / Hardswish
kinks can flip). Models whose gradients hinge
on kinks, BatchNorm's cancelling sums, or Adam's per-element normalisation
are far more sensitive than one rounding; a reimplementation cannot be
expected to match eager more closely than eager matches itself.

  /usr/bin/python3 scripts/eager_spread.py SPEC.py [--steps 5] [--rounds 3] [--show 10]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from trainstep import capture, exporter as export, golden  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="noisy runs of each kind")
    ap.add_argument("--show", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    spec = export.load_spec(a.spec)
    parts = capture.StepParts(spec)
    batches = golden.make_batches(parts, a.steps, a.seed)
    base = golden._run(parts, batches, a.seed, grads=False)
    spread = golden.calibrate(parts, batches, a.seed, False, base, a.rounds)
    for key, d in sorted(spread.items(), key=lambda kv: kv[1])[-a.show:]:
        print(f"{d:.2e}  {key}")
    worst = max(spread.items(), key=lambda kv: kv[1])
    print(f"spread: {worst[1]:.2e} ({worst[0]}; {a.rounds} round(s) of {'/'.join(golden.NOISE)} "
          f"noise, {a.steps} steps); verify allows {golden.FACTOR:g}x each value's, at least "
          f"{golden.FLOOR['float32']:g} (float32)")


if __name__ == "__main__":
    main()
