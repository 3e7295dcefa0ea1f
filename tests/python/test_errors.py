"""Bad input gets a one-line error naming the file and the problem, a
non-zero exit (README "Errors and exit codes"), and no crash, hang or
traceback."""
import os
import shutil

import pytest

from conftest import ROOT, run


def _one_line_error(p, *needles, code=1, prefix="trainstep: "):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(prefix) and "internal error" not in lines[0], lines[0]
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def test_missing_artifact():
    _one_line_error(run("verify", "/nonexistent/model.tstep", check=False),
                    "/nonexistent/model.tstep", "no such file")


def test_truncated_artifact(mnist_adadelta, tmp_path):
    data = open(mnist_adadelta, "rb").read()
    for cut in (4, 100, len(data) // 2, len(data) - 1):
        bad = tmp_path / f"cut{cut}.tstep"
        bad.write_bytes(data[:cut])
        _one_line_error(run("inspect", bad, check=False), str(bad))


def test_corrupted_artifact(mnist_adadelta, tmp_path):
    data = bytearray(open(mnist_adadelta, "rb").read())
    n = int.from_bytes(data[:8], "little")
    for pos in (9, n // 2, n - 3):  # inside the JSON header
        bad = tmp_path / f"flip{pos}.tstep"
        d = bytearray(data)
        d[pos] = ord("#")
        bad.write_bytes(bytes(d))
        _one_line_error(run("inspect", bad, check=False), str(bad))


def _rewrite(src, dst, **meta_changes):
    from trainstep import safetensors_io
    tensors, meta = safetensors_io.load(src)
    meta.update(meta_changes)
    safetensors_io.save(dst, tensors, meta)


def test_unknown_format_version(mnist_adadelta, tmp_path):
    bad = str(tmp_path / "v99.tstep")
    _rewrite(mnist_adadelta, bad, format_version="99")
    _one_line_error(run("verify", bad, check=False), bad, "unsupported format version '99'")


def test_not_an_artifact(tmp_path):
    bad = tmp_path / "text.tstep"
    bad.write_text("hello, this is not an artifact\n")
    _one_line_error(run("inspect", bad, check=False), str(bad))


def test_non_idx_dataset(mnist_adadelta, tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for n in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
              "t10k-labels-idx1-ubyte"):
        (d / n).write_bytes(b"PK\x03\x04 definitely a zip file, not IDX" * 10)
    _one_line_error(run("train", mnist_adadelta, "--data", f"idx:{d}", check=False),
                    "train-images-idx3-ubyte", "not an IDX file")


def test_missing_dataset_dir(mnist_adadelta, tmp_path):
    _one_line_error(run("train", mnist_adadelta, "--data", f"idx:{tmp_path}/none", check=False),
                    f"{tmp_path}/none")


def test_checkpoint_from_a_different_model(mnist_adadelta, tmp_path):
    from trainstep import safetensors_io
    import torch
    other = str(tmp_path / "other.ckpt")
    safetensors_io.save(other, {"encoder.weight": torch.zeros(3, 3)},
                        {"format": "trainstep-checkpoint", "format_version": "1", "model": "vae",
                         "step": "0", "seed": "0", "lr": "0.1"})
    _one_line_error(run("eval", mnist_adadelta, "--checkpoint", other, check=False),
                    other, "different model")


def test_checkpoint_with_a_wrong_shape(mnist_adadelta, small_data, tmp_path):
    from trainstep import safetensors_io
    ckpt = str(tmp_path / "m.ckpt")
    run("train", mnist_adadelta, "--data", f"idx:{small_data}", "--max-batches", 1, "--save", ckpt)
    tensors, meta = safetensors_io.load(ckpt)
    tensors["fc2.weight"] = tensors["fc2.weight"][:5]
    safetensors_io.save(ckpt, tensors, meta)
    _one_line_error(run("eval", mnist_adadelta, "--checkpoint", ckpt, check=False),
                    ckpt, "different model", "fc2.weight")


def test_spec_without_build(tmp_path):
    spec = tmp_path / "empty.py"
    spec.write_text("x = 1\n")
    p = run("export", spec, "--out", tmp_path / "x.tstep", check=False)
    assert p.returncode != 0 and "defines no build() function" in p.stderr


# --- usage errors: exit 2, one line; --help still exits 0 -----------------

@pytest.mark.parametrize("args", [
    ("verify",), ("no-such-command",), ("verify", "a.tstep", "--no-such-flag"),
    ("train", "a.tstep", "--data", "idx:x", "--keep", "0"), ("export", "spec.py"), (),
])
def test_usage_error_exits_2(args):
    line = _one_line_error(run(*args, check=False), code=2)
    assert "--help" in line


def test_help_exits_0_and_lists_the_exit_codes():
    p = run("--help")
    assert "Usage" in p.stdout and "Exit status" in p.stdout and "3 verify mismatch" in p.stdout
    assert run("export", "--help").returncode == 0
