"""Export: the artifact loads in C++, and unsupported ops fail at export."""
import os

import pytest

from conftest import ROOT, SPECS, run

pytestmark = [pytest.mark.asan]


def test_inspect_shows_the_whole_step(mnist_adadelta):
    out = run("inspect", mnist_adadelta).stdout
    assert "model mnist_cnn" in out
    assert "parameters: 1199882 trainable" in out  # conv1+conv2+fc1+fc2 of the seed's CNN
    assert "aten.convolution_backward.default" in out
    assert "trainstep.philox_uniform.default" in out
    assert "function train_step" in out and "function eval_step" in out


def test_ops_json_lists_the_registry():
    import json
    ops = {o["name"] for o in json.loads(run("ops", "--json").stdout)["ops"]}
    assert "aten.convolution_backward.default" in ops


def test_unsupported_op_fails_at_export(tmp_path):
    """The message names the op, its node count per function, the module
    that called it and the spec's source line (recorded at capture; torch
    1.13's make_fx records neither)."""
    spec = os.path.join(SPECS, "unsupported_fft.py")
    out = tmp_path / "fft.tstep"
    p = run("export", spec, "--out", out, check=False)
    assert p.returncode != 0
    assert not out.exists()
    assert "unsupported op(s)" in p.stderr and "docs/ops.md" in p.stderr
    line = next(i for i, l in enumerate(open(spec), 1) if "return torch.fft.rfft" in l)
    want = (f"  aten._fft_r2c.default: 2 node(s) (eval_step 1, train_step 1); first from module "
            f"'features' (SpectralFeatures), {spec}:{line} in forward: return torch.fft.rfft(x).abs()")
    assert want in p.stderr.splitlines(), p.stderr


def test_nodes_record_their_module_and_line(mnist_adadelta):
    """Forward nodes carry the module path and the spec line that made them."""
    import json
    from trainstep import safetensors_io
    _, meta = safetensors_io.load(mnist_adadelta)
    nodes = json.loads(meta["program"])["functions"]["train_step"]["nodes"]
    conv = next(n for n in nodes if n["op"] == "aten.convolution.default")
    assert conv["source"]["module"] == "conv1" and conv["source"]["module_type"] == "Conv2d"
    spec = os.path.join(ROOT, "examples", "mnist", "spec.py")
    assert conv["source"]["file"] == spec
    assert "self.conv1(" in open(spec).readlines()[conv["source"]["line"] - 1]
