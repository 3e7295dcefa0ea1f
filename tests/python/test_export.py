"""Export: the artifact loads in C++, and unsupported ops fail at export."""
import os

from conftest import SPECS, run


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
    out = tmp_path / "fft.tstep"
    p = run("export", os.path.join(SPECS, "unsupported_fft.py"), "--out", out, check=False)
    assert p.returncode != 0
    assert not out.exists()
    assert "unsupported op(s)" in p.stderr and "docs/ops.md" in p.stderr
    assert "aten._fft_r2c.default: 1 node(s) in eval_step, train_step" in p.stderr or \
        "_fft_r2c" in p.stderr, p.stderr
