"""The worker side of bench/peers: one process per peer, which builds its
step once (compiling it), then times steps when the driver asks.

Lines on the protocol pipe (the process's original stdout; everything else
printed goes to stderr, the worker's log) are JSON:
  worker -> {"ready": true, "warmup_s": [...], "note": "..."} or {"error": "..."}
  driver -> "N"      worker -> {"ms": median ms/step over N, "cpu": cpu s / wall s}
"""
import json
import os
import resource
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchlib import step_times  # noqa: E402


def _cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def serve(setup, warmup=3):
    """setup() -> (step, sync, note, check): step() runs one training step,
    sync(result) waits for it; note() (after the warm-up) is a line for the
    report; check() runs after each timed batch: a problem seen, or ''."""
    pipe = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints (compilers, warnings) go to the log, not the pipe
    sys.stdout = sys.stderr

    def send(obj):
        pipe.write(json.dumps(obj) + "\n")

    try:
        step, sync, note, check = setup()
        warm = step_times(step, warmup, sync)  # the first calls compile
    except Exception as e:  # a peer that cannot run is a cell, not a crash
        traceback.print_exc()
        send({"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]})
        return
    send({"ready": True, "warmup_s": warm, "note": note()})
    for line in sys.stdin:
        n = int(line)
        c0, w0 = _cpu_s(), time.perf_counter()
        try:
            ms = statistics.median(step_times(step, n, sync)) * 1e3
        except Exception as e:
            traceback.print_exc()
            send({"error": f"{type(e).__name__}: {e}"[:300]})
            return
        wall = time.perf_counter() - w0
        send({"ms": ms, "cpu": (_cpu_s() - c0) / wall, "problem": check()})
