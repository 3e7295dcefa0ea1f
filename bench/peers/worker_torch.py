"""bench/peers worker: the spec's step in torch 2.x, eager or torch.compile'd.

    worker_torch.py --peer eager|compile|max-autotune --spec SPEC --threads T

compile and max-autotune compile the whole step function: zero_grad,
forward, loss, backward and optimizer.step() (mode default, or
"max-autotune-no-cudagraphs"). Dynamo splits it at .backward() into graphs
(AOTAutograd compiles the backward too); the note says how many.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from benchlib import eager_step  # noqa: E402
from protocol import serve  # noqa: E402

MODES = {"compile": None, "max-autotune": "max-autotune-no-cudagraphs"}


def setup(a):
    import torch
    torch.set_flush_denormal(True)  # before the thread pool exists: its threads inherit it
    torch.set_num_threads(a.threads)
    from trainstep.exporter import load_spec
    step = eager_step(load_spec(a.spec))
    base = f"torch {torch.__version__}, set_num_threads({a.threads})"
    if a.peer == "eager":
        return step, lambda r: None, lambda: base, lambda: ""
    from torch._dynamo.utils import counters
    step = torch.compile(step, mode=MODES[a.peer])

    def graphs():
        return counters["stats"]["unique_graphs"]

    seen = []

    def note():
        seen.append(graphs())
        breaks = sum(counters["graph_break"].values())
        return f"{base}, mode={MODES[a.peer] or 'default'}: {seen[0]} graphs, {breaks} graph breaks"

    def check():
        new = graphs() - seen[0]
        return f"recompiled {new} graphs while timed" if new else ""
    return step, lambda r: None, note, check


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", choices=["eager", *MODES], required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    serve(lambda: setup(a))


if __name__ == "__main__":
    main()
