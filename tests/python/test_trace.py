"""`export --trace-values` + `verify --trace`: every train_step node's C++
value against the eager value of the captured graph on golden step 0, and
the first divergence named by node and op."""
import json
import os

import pytest

from conftest import SPECS, run

pytestmark = [pytest.mark.asan]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("trace") / "small_cnn.tstep")
    run("export", os.path.join(SPECS, "small_cnn.py"), "--out", out, "--trace-values")
    return out


def _nodes(path):
    from trainstep import safetensors_io
    tensors, meta = safetensors_io.load(path)
    program = json.loads(meta["program"])
    return tensors, meta, program["functions"]["train_step"]["nodes"]


def test_every_node_matches(traced):
    tensors, _, nodes = _nodes(traced)
    recorded = [k for k in tensors if k.startswith("trace/train_step/")]
    # One recorded value per node output (constants are the exporter's own, not graph nodes).
    named = {o for n in nodes if n["op"] != "trainstep.constant" for o in n["outputs"] if o}
    assert {k[len("trace/train_step/"):] for k in recorded} == named
    p = run("verify", traced, "--trace", "-q")
    assert f"trace: all {len(recorded)} recorded node values match" in p.stdout, p.stdout
    assert p.stdout.strip().splitlines()[-1] == "verify: ok"


@pytest.mark.parametrize("op", ["aten.relu.default", "aten.convolution_backward.default"])
def test_corrupted_value_is_reported_at_its_node(traced, tmp_path, op):
    """One element of one recorded value is changed: verify --trace names
    that node (and only it) as the first divergence and fails."""
    from trainstep import safetensors_io
    tensors, meta, nodes = _nodes(traced)
    node = next(n for n in nodes if n["op"] == op)
    value = next(o for o in node["outputs"] if o)
    key = f"trace/train_step/{value}"
    t = tensors[key].clone()
    t.view(-1)[t.numel() // 2] += 1.0 + t.abs().max()
    tensors[key] = t
    bad = str(tmp_path / "corrupt.tstep")
    safetensors_io.save(bad, tensors, meta)
    p = run("verify", bad, "--trace", "-q", check=False)
    assert p.returncode == 3, p.stdout + p.stderr  # a verify mismatch
    first = f"trace: first divergence at node '{node['name']}' ({op}) value '{value}'"
    assert first in p.stdout and "(1 of " in p.stdout, p.stdout
    assert p.stdout.strip().splitlines()[-1].startswith(f"verify: FAILED trace: node '{node['name']}'")


def test_trace_needs_recorded_values(tmp_path):
    plain = str(tmp_path / "plain.tstep")
    run("export", os.path.join(SPECS, "small_cnn.py"), "--out", plain)
    p = run("verify", plain, "--trace", check=False)
    assert p.returncode == 1
    assert p.stderr.strip() == (f"trainstep: {plain}: the artifact has no recorded trace "
                                "(export it with --trace-values)")
