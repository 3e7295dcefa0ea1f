"""The training step allocates nothing: `trainstep bench` run under the
LD_PRELOAD allocation counter (build/liballoc_counter.so, tests/alloc_counter.c)
makes exactly as many allocations with 30 timed steps as with 10.

Two libraries allocate on every step by themselves, so the counter
attributes allocations whose call stack passes through them separately
(ALLOC_COUNTER_EXCLUDE; the innermost library frame decides):
  libdnnl  dnnl_primitive_execute builds its argument map (exec_args_t, a
           std::unordered_map) on every call; there is no allocation-free
           entry point in oneDNN's API.
  libgomp  every OpenMP region that runs with one thread (an `if` clause that
           is false, or --threads 1) allocates and frees its team in
           GOMP_parallel (libgomp caches only teams of more than one thread).
           The kernels never start such a region (src/ops/parallel.h runs the
           loop on the calling thread instead), so test_openmp_regions_do_not_allocate
           asserts that libgomp allocates nothing per step either.
Everything else (runtime, session, kernels, the bench loop) must not allocate."""
import os
import re
import subprocess
import sys

import pytest

from conftest import BIN

COUNTER = os.path.join(os.path.dirname(BIN), "liballoc_counter.so")
LIBS = ("libdnnl", "libgomp")

pytestmark = [pytest.mark.runtime,
              pytest.mark.skipif(not os.path.exists(COUNTER),
                                 reason="build/liballoc_counter.so not built")]


def _count(art, steps, flags, tmp_path, warmup=3, env=None):
    """Allocation counts of a bench run: {"own": n, "libdnnl": n, "libgomp": n}.
    Kernel picks (src/ops/kernel_choice.h) are measured once, uncounted, so
    every counted run compiles the same way: from the cache."""
    out = tmp_path / f"allocs_{steps}{''.join(flags)}.txt"
    base = dict(os.environ, TRAINSTEP_PYTHON=sys.executable,
                TRAINSTEP_CACHE=str(tmp_path / "kernel-cache"), **(env or {}))
    p = subprocess.run([BIN, "bench", art, "--steps", "1", "--warmup", "0", *flags],
                       capture_output=True, text=True, env=base, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    env = dict(base, LD_PRELOAD=COUNTER, ALLOC_COUNTER_OUT=str(out),
               ALLOC_COUNTER_EXCLUDE=",".join(LIBS))
    p = subprocess.run([BIN, "bench", art, "--steps", str(steps), "--warmup", str(warmup), *flags],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    text = out.read_text()
    m = re.fullmatch(r"alloc_counter: allocs=(\d+) frees=\d+ excluded=(\S+)\n", text)
    assert m, text
    counts = {"own": int(m.group(1))}
    for item in m.group(2).split(","):
        lib, n = item.split(":")
        counts[lib] = int(n)
    return counts


@pytest.fixture(scope="module")
def per_step(mnist_adadelta, tmp_path_factory):
    """Extra allocations of 20 more steps, by where they come from, per flag set."""
    cache = {}

    def get(flags=()):
        if flags not in cache:
            d = tmp_path_factory.mktemp("alloc")
            a, b = (_count(mnist_adadelta, n, list(flags), d) for n in (10, 30))
            cache[flags] = {k: b[k] - a[k] for k in a}
        return cache[flags]
    return get


@pytest.mark.parametrize("flags", [(), ("--no-inplace",)], ids=["inplace", "no-inplace"])
def test_train_step_does_not_allocate(per_step, flags):
    extra = per_step(flags)
    assert extra["own"] == 0, f"allocations in 20 more steps, outside {LIBS}: {extra}"


@pytest.mark.parametrize("flags", [(), ("--threads", "1"), ("--threads", "2")],
                         ids=["default", "threads1", "threads2"])
def test_openmp_regions_do_not_allocate(per_step, flags):
    extra = per_step(flags)
    assert extra["libgomp"] == 0, f"libgomp allocations in 20 more steps: {extra}"


def test_batch_norm_depthwise_model_does_not_allocate(artifacts, tmp_path):
    """The MobileNet example: BatchNorm forward and backward, grouped
    (depthwise) convolutions, clamp (Hardswish), Adam; default threads."""
    from conftest import ROOT
    art = artifacts("mobilenet", os.path.join(ROOT, "examples", "mobilenet", "spec.py"))
    a, b = (_count(art, n, [], tmp_path) for n in (10, 30))
    extra = {k: b[k] - a[k] for k in a}
    assert extra["own"] == 0 and extra["libgomp"] == 0, f"allocations in 20 more steps: {extra}"


def test_accumulated_step_does_not_allocate(artifacts, tmp_path):
    """grad_step x 2 + apply_grads (gradient accumulation) allocate nothing either."""
    art = artifacts("accum16", os.path.join(os.path.dirname(__file__), "specs", "accum16.py"))
    flags = ["--accumulate", "2"]
    a, b = (_count(art, n, flags, tmp_path) for n in (10, 30))
    extra = {k: b[k] - a[k] for k in a}
    assert extra["own"] == 0 and extra["libgomp"] == 0, extra


@pytest.mark.parametrize("model", ["char_transformer", "char_lstm"])
def test_sequence_models_do_not_allocate(model, request, tmp_path):
    """The sequence models' kernels (layer norm, softmax, gelu, masked_fill,
    the RNN's split/unbind/stack, index_put, ...): 5 more steps, no more
    allocations. The LSTM (7,700 small kernels a step) runs on one thread
    only: two threads on a busy 2-core machine make it minutes slower, and
    its kernels are the same on either path."""
    art = request.getfixturevalue(model)
    threads = ["1", "2"] if model == "char_transformer" else ["1"]
    for flags in (["--threads", t] for t in threads):
        a, b = (_count(art, n, flags, tmp_path, warmup=2) for n in (5, 10))
        extra = {k: b[k] - a[k] for k in a}
        assert extra["own"] == 0 and extra["libgomp"] == 0, (flags, extra)


def test_openblas_products_do_not_allocate(char_transformer, tmp_path):
    """OpenBLAS is a GEMM candidate at one thread only (threaded, it
    allocates on every call): forced, the transformer's products on it
    allocate nothing per step. The library is dlopen'ed after the counter
    looks, so its allocations would count as the step's own."""
    env = {"TRAINSTEP_KERNELS": "openblas"}
    a, b = (_count(char_transformer, n, ["--threads", "1"], tmp_path, warmup=2, env=env)
            for n in (5, 10))
    extra = {k: b[k] - a[k] for k in a}
    assert extra["own"] == 0 and extra["libgomp"] == 0, extra


def test_float64_model_does_not_allocate(artifacts, tmp_path):
    """A float64 model (time_sequence_prediction's LSTMCell loop): its
    matrix products run on Gemm64 (src/ops/gemm64.h), whose packing buffers
    are allocated at compile time; one and two threads."""
    art = artifacts("double_lstm", os.path.join(os.path.dirname(__file__), "specs", "real",
                                                "double_lstm.py"))
    for flags in (["--threads", "1"], ["--threads", "2"]):
        a, b = (_count(art, n, flags, tmp_path) for n in (10, 30))
        extra = {k: b[k] - a[k] for k in a}
        assert extra["own"] == 0 and extra["libgomp"] == 0, (flags, extra)
