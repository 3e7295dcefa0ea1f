#!/usr/bin/env python3
"""A character language model's held-out loss against the unigram baseline.

    bench/lm_convergence.py SPEC.py --data fortunes:64 [--batches N] [--threads T]
    bench/lm_convergence.py --baseline-only --data fortunes:64

Exports SPEC, trains it from C++ for N batches (`trainstep train
--max-batches N`, one partial epoch) and evaluates on the test split. The
baseline is the cross-entropy of the same held-out targets under the train
split's byte frequencies (add-one smoothed over 256 bytes), in nats per
byte: what the best model that ignores context scores. The held-out text's
entropy under its own byte frequencies (no model that ignores context can
beat it on this text) is printed too.

The split repeats src/data/text.h exactly (tests/python/test_seq_models.py
checks the window counts against the C++ side): test = the last len // 10
bytes; windows of T+1 bytes every T bytes; the targets are bytes 1..T of
each window.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("TRAINSTEP_BIN", os.path.join(ROOT, "build", "trainstep"))
FORTUNES = "/usr/share/games/fortunes"


def read_corpus(spec):
    """(bytes, T) of a `fortunes:T` or `text:FILE:T` data spec."""
    name, _, t = spec.rpartition(":")
    if name == "fortunes":
        files = sorted(n for n in os.listdir(FORTUNES)
                       if not n.startswith(".") and not n.endswith(".dat")
                       and os.path.isfile(os.path.join(FORTUNES, n))
                       and not os.path.islink(os.path.join(FORTUNES, n)))
        data = b"".join(open(os.path.join(FORTUNES, n), "rb").read() for n in files)
    elif name.startswith("text:"):
        data = open(name[5:], "rb").read()
    else:
        raise SystemExit(f"unsupported data spec {spec!r} (fortunes:T or text:FILE:T)")
    return data, int(t)


def split(data, T):
    """(train bytes, test bytes, test targets) as src/data/text.cpp cuts them."""
    cut = len(data) - len(data) // 10
    train, test = data[:cut], data[cut:]
    n = (len(test) - 1) // T
    targets = b"".join(test[i * T + 1:i * T + T + 1] for i in range(n))
    return train, test, targets, (len(train) - 1) // T, n


def baseline(data, T):
    train, _, targets, n_train, n_test = split(data, T)
    counts = Counter(train)
    total = len(train) + 256
    cross = -sum(math.log((counts[b] + 1) / total) for b in targets) / len(targets)
    own = Counter(targets)
    entropy = -sum(c / len(targets) * math.log(c / len(targets)) for c in own.values())
    return cross, entropy, n_train, n_test, len(targets)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="?")
    ap.add_argument("--data", default="fortunes:64")
    ap.add_argument("--batches", type=int, default=600)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr-schedule", default=None, help="passed to trainstep train (unit: step)")
    ap.add_argument("--baseline-only", action="store_true")
    a = ap.parse_args()

    data, T = read_corpus(a.data)
    cross, entropy, n_train, n_test, n_targets = baseline(data, T)
    print(f"data {a.data}: {len(data)} bytes, {n_train} train / {n_test} test windows, "
          f"{n_targets} held-out targets")
    print(f"unigram_baseline_nats={cross:.4f}  (held-out targets under train byte frequencies)")
    print(f"heldout_unigram_entropy_nats={entropy:.4f}  (held-out text under its own frequencies)")
    if a.baseline_only:
        return 0
    if not a.spec:
        ap.error("SPEC.py is required unless --baseline-only")
    with tempfile.TemporaryDirectory() as d:
        art = os.path.join(d, "model.tstep")
        subprocess.run([BIN, "export", a.spec, "--out", art, "--golden-steps", "1"], check=True,
                       stdout=subprocess.DEVNULL)
        cmd = [BIN, "train", art, "--data", a.data, "--epochs", "1", "--max-batches",
               str(a.batches), "--threads", str(a.threads)]
        if a.lr_schedule:
            cmd += ["--lr-schedule", a.lr_schedule, "--lr-schedule-unit", "step"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    print(out.strip())
    m = re.search(r"train loss ([0-9.]+), test loss ([0-9.]+).*?, ([0-9.]+) s$", out, re.M)
    train_loss, test_loss, secs = float(m.group(1)), float(m.group(2)), float(m.group(3))
    print(f"heldout_loss_nats={test_loss:.4f} after {a.batches} batches ({secs:.0f} s of training)")
    print(f"heldout_loss / unigram_baseline = {test_loss / cross:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
