"""What bench/compare and bench/peers share: a fair eager baseline, the
eager training step, per-step timing, and `trainstep bench` runs."""
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("TRAINSTEP_BIN", os.path.join(ROOT, "build", "trainstep"))

# A fair eager baseline. Left alone, glibc serves PyTorch's multi-MiB
# activation tensors with fresh mmap()s every step (page faults, zeroing)
# until something large is freed, as loading a dataset does in real training;
# and repeating one synthetic batch drives gradients into denormals. Either
# makes eager 2-4x slower than in a real epoch. So every Python peer gets a
# warm heap (mmap threshold raised, as glibc itself does after a big free)
# and flush-to-zero; trainstep allocates nothing per step, so neither helps it.
WARM_HEAP = {"MALLOC_MMAP_THRESHOLD_": str(256 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


def warm_heap_env(env=None):
    """env (default os.environ) with the warm-heap malloc settings added."""
    env = dict(os.environ if env is None else env)
    for k, v in WARM_HEAP.items():
        env.setdefault(k, v)
    return env


def reexec_with_warm_heap():
    """glibc reads the thresholds at start-up: re-exec this process with them."""
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        os.execve(sys.executable, [sys.executable] + sys.argv, warm_heap_env())


def eager_step(spec):
    """The spec's training step in eager PyTorch, as a function of nothing:
    zero_grad, forward, loss, backward, optimizer.step() on the example batch."""
    model, opt, loss_fn = spec.model, spec.optimizer, spec.loss_fn
    xs, y = list(spec.example_inputs), spec.example_target
    model.train()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(*xs), y)
        loss.backward()
        opt.step()
        return loss
    return step


def step_times(step, n, sync=lambda r: None):
    """Seconds of each of n calls of step(); sync(result) waits for it to
    finish (JAX dispatches asynchronously)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        sync(step())
        times.append(time.perf_counter() - t0)
    return times


def eager_steps(spec, n):
    """Median ms/step of n eager steps."""
    return statistics.median(step_times(eager_step(spec), n)) * 1e3


def trainstep_bench(artifact, steps, threads, warmup=3, profile=False, binary=BIN, prefix=()):
    """Runs `trainstep bench` (after prefix, e.g. taskset's arguments);
    returns (median ms/step, load+compile s, stdout)."""
    cmd = [*prefix, binary, "bench", artifact, "--steps", str(steps), "--warmup", str(warmup),
           "--threads", str(threads)] + (["--profile"] if profile else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:  # its stderr says why; CalledProcessError would drop it
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-4000:]}")
    out = p.stdout
    ms = float(re.search(r"step_ms_median=([0-9.]+)", out).group(1))
    m = re.search(r"load\+compile ([0-9.]+) s", out)
    return ms, float(m.group(1)) if m else float("nan"), out
