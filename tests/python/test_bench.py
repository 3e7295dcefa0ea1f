"""`trainstep bench --profile` in every build, sanitizers included: the peers
benchmark only profiles a model where trainstep is slower, so without this
the profiling path ran in CI only on a slow machine (where it once failed
under UBSan)."""
import re

import pytest

from conftest import run

pytestmark = [pytest.mark.runtime, pytest.mark.asan]


def _profile_rows(out, head="op "):
    """(name, nodes, ms/step, share %) per row of the profile table."""
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(head))
    rows = []
    for l in lines[start + 1:]:
        m = re.match(r"(\S.*?)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)%", l)
        if not m:
            break
        rows.append((m.group(1), int(m.group(2)), float(m.group(3)), float(m.group(4))))
    return rows


def test_profile_rows_add_up(mnist_adadelta):
    out = run("bench", mnist_adadelta, "--steps", "3", "--warmup", "1", "--threads", "1",
              "--profile").stdout
    rows = _profile_rows(out)
    assert rows, out
    ops = [r[0] for r in rows]
    assert len(ops) == len(set(ops)), out  # one row per op
    assert all(n >= 1 for _, n, _, _ in rows), out
    assert "aten.convolution.default" in ops or any("conv" in o for o in ops), out
    # Kernel shares are parts of the step time: they sum to at most 100 %
    # (rounding aside), and the remainder is what the summary calls outside.
    kernels = sum(share for _, _, _, share in rows)
    assert kernels <= 100.5, out
    outside = float(re.search(r"outside compute kernels: ([0-9.]+)%", out).group(1))
    assert 0 <= outside <= 100, out
    median = float(re.search(r"step_ms_median=([0-9.]+)", out).group(1))
    assert median > 0


def test_profile_by_shape_splits_each_op(mnist_adadelta):
    """--by-shape: a row per op and output type, whose node counts add up to
    the op's row in the plain profile (the same nodes, split by shape)."""
    args = ("bench", mnist_adadelta, "--steps", "1", "--warmup", "0", "--threads", "1", "--profile")
    by_op = {name: n for name, n, _, _ in _profile_rows(run(*args).stdout)}
    out = run(*args, "--by-shape").stdout
    rows = _profile_rows(out, head="op and output ")
    split = {}
    for name, n, _, _ in rows:
        op, _, shape = name.partition(" ")
        assert re.match(r"\w+\[[0-9, ]*\]( trans_a)?( trans_b)?$", shape), name
        split[op] = split.get(op, 0) + n
    assert split == by_op, out
    assert any(" trans_" in name for name, *_ in rows), out  # the classifier's products
    bad = run("bench", mnist_adadelta, "--by-shape", check=False)
    assert bad.returncode == 2 and "--by-shape requires --profile" in bad.stderr, bad.stderr


def test_profile_reports_the_kernels_chosen_by_measurement(mnist_adadelta, tmp_path):
    """MNIST's fully connected products (oneDNN, OpenBLAS, and SmallGemm
    where the inner dimension is small) and its first convolution's weight
    gradient (one input channel) were chosen by measurement; the profile
    says which won and what each candidate took, and a second run reads the
    cache."""
    env = {"TRAINSTEP_CACHE": str(tmp_path)}
    args = ("bench", mnist_adadelta, "--steps", "1", "--warmup", "0", "--threads", "1", "--profile")
    for run_no, origin in enumerate(["", "; cached"]):
        out = run(*args, env=env).stdout
        assert "kernels chosen by measurement (cache: %s/kernel-choices.json)" % tmp_path in out, out
        rows = re.findall(r"^  (gemm m=\d+ n=\d+ k=\d+[^\n]*?)\s+(\d+) nodes?\s+(\w+) \((.*)\)$",
                          out, re.M)
        assert rows, out
        assert any("small_k" in timings for *_, timings in rows), out
        convs = re.findall(r"^  (conv_wgrad n=\d+ c=1 [^\n]*?)\s+(\d+) nodes?\s+(\w+) \((.*)\)$",
                           out, re.M)
        assert len(convs) == 1, out  # the first convolution's weight gradient
        # At one thread every product has OpenBLAS too; SmallGemm takes a small K or M.
        for (key, nodes, pick, timings), names in ([(r, {"onednn", "openblas"}) for r in rows] +
                                                   [(c, {"onednn", "one_channel"}) for c in convs]):
            times = dict(re.findall(r"(\w+) ([0-9.]+) us", timings))
            assert set(times) - {"small_k"} == names, timings
            assert timings.endswith(origin) and (origin or "cached" not in timings), timings
    forced = run(*args, env=dict(env, TRAINSTEP_KERNELS="small_k")).stdout
    assert "small_k (forced by TRAINSTEP_KERNELS)" in forced, forced
    bad = run(*args, env=dict(env, TRAINSTEP_KERNELS="fastest"), check=False)
    assert bad.returncode != 0 and "TRAINSTEP_KERNELS=fastest: unknown kernel" in bad.stderr, bad.stderr
