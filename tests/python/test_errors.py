"""Bad input gets a one-line error naming the file and the problem, a
non-zero exit (README "Errors and exit codes"), and no crash, hang or
traceback."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import BIN, ROOT, run

pytestmark = [pytest.mark.asan]


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
    ("verify", "a.tstep", "--tol", "nan"),
])
def test_usage_error_exits_2(args):
    line = _one_line_error(run(*args, check=False), code=2)
    assert "--help" in line


def test_help_exits_0_and_lists_the_exit_codes():
    p = run("--help")
    assert "Usage" in p.stdout and "Exit status" in p.stdout and "3 verify mismatch" in p.stdout
    assert run("export", "--help").returncode == 0


# --- export: the user's spec fails -> one line at the spec's own line ----

def _line_of(text, needle):
    """1-based line number of the line holding `needle`."""
    return next(i for i, s in enumerate(text.splitlines(), 1) if needle in s)


DATA_DEPENDENT = """import torch
import torch.nn as nn
import torch.nn.functional as F
import trainstep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        return F.log_softmax(self.fc(x), dim=1)


def build():
    m = Net()
    return trainstep.TrainSpec(m, F.nll_loss, torch.optim.SGD(m.parameters(), lr=0.1),
                               (torch.randn(2, 4),), torch.randint(0, 3, (2,)))
"""

RAISES = """import trainstep


def helper():
    raise ValueError("no data for this model\\nsecond line of detail")


def build():
    return helper()
"""


def _export(tmp_path, name, text, *extra):
    spec = tmp_path / name
    spec.write_text(text)
    return spec, run("export", spec, "--out", tmp_path / "x.tstep", *extra, check=False)


def test_data_dependent_control_flow_names_the_spec_line(tmp_path):
    spec, p = _export(tmp_path, "datadep.py", DATA_DEPENDENT)
    line = _one_line_error(p, prefix="trainstep export: ")
    assert f"{spec}:{_line_of(DATA_DEPENDENT, 'if x.sum() > 0:')}: data-dependent control flow: " \
        in line, line  # more classes: test_capture_errors.py
    assert not (tmp_path / "x.tstep").exists()


def test_exception_in_build_names_the_innermost_spec_line(tmp_path):
    spec, p = _export(tmp_path, "raises.py", RAISES)
    line = _one_line_error(p, prefix="trainstep export: ")
    want = f"{spec}:{_line_of(RAISES, 'raise ValueError')}: ValueError: no data for this model "
    assert line == f"trainstep export: {want}(run with --debug for the full traceback)", line


TORCH_LOSS_ON_A_TUPLE = """import torch
import torch.nn.functional as F
import trainstep


class TwoHeads(torch.nn.Module):  # torchvision's GoogLeNet returns its aux logits too
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x), self.fc(x).detach()


def build():
    model = TwoHeads()
    return trainstep.TrainSpec(model, F.cross_entropy, torch.optim.SGD(model.parameters(), lr=0.1),
                               (torch.randn(2, 4),), torch.randint(0, 3, (2,)))
"""


def test_a_torch_loss_failing_names_the_spec_not_trainstep(tmp_path):
    """loss_fn=F.cross_entropy on a model returning a tuple: no frame of the
    user's raises, and trainstep's own call of loss_fn is no place to point
    the user to; the spec file is."""
    spec, p = _export(tmp_path, "tuple_loss.py", TORCH_LOSS_ON_A_TUPLE)
    line = _one_line_error(p, f"trainstep export: {spec}: TypeError: ", "not tuple",
                           prefix="trainstep export: ")
    assert "trainstep/" not in line.split("TypeError")[0], line


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_prints_the_traceback(tmp_path, where):
    """--debug, before or after the subcommand: the traceback, then the line."""
    spec = tmp_path / "raises.py"
    spec.write_text(RAISES)
    args = ["export", spec, "--out", tmp_path / "x.tstep"]
    args = ["--debug", *args] if where == "before" else [*args, "--debug"]
    p = run(*args, check=False)
    assert p.returncode == 1
    assert "Traceback (most recent call last)" in p.stderr and "second line of detail" in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last == f"trainstep export: {spec}:{_line_of(RAISES, 'raise ValueError')}: " \
                   "ValueError: no data for this model", last


def test_spec_syntax_error_names_the_line(tmp_path):
    text = "import trainstep\n\ndef build(:\n    pass\n"
    spec, p = _export(tmp_path, "broken.py", text)
    _one_line_error(p, f"{spec}:{_line_of(text, 'def build(:')}: SyntaxError", prefix="trainstep export: ")


def test_missing_spec_is_one_line(tmp_path):
    spec = tmp_path / "nope.py"
    p = run("export", spec, "--out", tmp_path / "x.tstep", check=False)
    assert _one_line_error(p, prefix="trainstep export: ") == f"trainstep export: {spec}: no such file"


def test_output_folder_is_checked_before_the_work(tmp_path):
    """The error names the output, not the temp file beside it."""
    out = tmp_path / "none" / "x.tstep"
    p = run("export", os.path.join(ROOT, "examples", "mnist", "spec.py"), "--out", out, check=False)
    _one_line_error(p, f"{out}: cannot write it: the folder {out.parent} does not exist",
                    prefix="trainstep export: ")


def test_python_without_torch_is_one_line(tmp_path):
    """A torch that fails to import (here a stand-in shadowing the real one)."""
    fake = tmp_path / "shadow" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('simulated: no torch here', name='torch')\n")
    env = dict(os.environ, TRAINSTEP_PYTHON=sys.executable, PYTHONPATH=str(fake.parent))
    p = subprocess.run([BIN, "export", os.path.join(ROOT, "examples", "mnist", "spec.py"), "--out",
                        str(tmp_path / "x.tstep")], capture_output=True, text=True, env=env)
    _one_line_error(p, "cannot import torch: simulated: no torch here", "TRAINSTEP_PYTHON")


INTERRUPTIBLE = """import os, time

def build():
    open(os.environ["TS_TEST_MARKER"], "w").close()
    time.sleep(60)
"""


@pytest.mark.parametrize("sig,code,message", [(signal.SIGINT, 130, "interrupted"),
                                              (signal.SIGTERM, 143, "stopped by signal 15")])
def test_interrupted_export_exits_128_plus_signal(tmp_path, sig, code, message):
    """A signal sent to trainstep reaches the Python side, which stops with
    one line; the exit status is 128 + the signal's number."""
    spec, marker = tmp_path / "slow.py", tmp_path / "started"
    spec.write_text(INTERRUPTIBLE)
    env = dict(os.environ, TRAINSTEP_PYTHON=sys.executable, TS_TEST_MARKER=str(marker))
    # A shell's background job (`make test &`) starts with SIGINT ignored,
    # and an ignored signal stays ignored in every child: reset it, as an
    # interactive shell would have it.
    p = subprocess.Popen([BIN, "export", str(spec), "--out", str(tmp_path / "x.tstep")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not marker.exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert marker.exists(), p.communicate()
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == code, (p.returncode, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in err, err


# --- import-checkpoint: unreadable inputs -> one line naming the file ----

def test_import_checkpoint_of_a_truncated_or_missing_file(mnist_adadelta, tmp_path):
    import torch
    good = tmp_path / "good.pt"
    torch.save({"model": {"w": torch.zeros(1000)}}, good)
    bad = tmp_path / "cut.pt"
    bad.write_bytes(good.read_bytes()[:500])
    out = tmp_path / "x.ckpt"
    _one_line_error(run("import-checkpoint", mnist_adadelta, bad, "--out", out, check=False),
                    f"{bad}: cannot read it as a torch.save file")
    missing = tmp_path / "none.pt"
    _one_line_error(run("import-checkpoint", mnist_adadelta, missing, "--out", out, check=False),
                    f"{missing}: No such file or directory")
    no_art = tmp_path / "none.tstep"
    _one_line_error(run("import-checkpoint", no_art, good, "--out", out, check=False),
                    f"{no_art}: No such file or directory")
    assert not out.exists()


# --- --help: an example for every subcommand; README documents every exit status

def _subcommands():
    text = run("--help").stdout
    section = text.split("Subcommands:", 1)[1]
    return [m.group(1) for m in re.finditer(r"^\s{2}(\S+)\s", section, re.M)]


def test_the_subcommand_list_is_complete():
    assert set(_subcommands()) >= {
        "export", "train", "eval", "verify", "inspect", "ops", "bench", "lr-schedule",
        "import-checkpoint", "export-checkpoint", "run-program", "check", "plot"}


@pytest.mark.parametrize("cmd", _subcommands())
def test_every_subcommand_help_has_an_example(cmd):
    p = run(cmd, "--help")
    assert p.returncode == 0
    assert re.search(rf"^Examples?:.*trainstep {cmd}\b", p.stdout, re.M | re.S), p.stdout
    assert "Exit status" in p.stdout  # the app's footer still follows


def test_readme_documents_every_exit_status():
    header = open(os.path.join(ROOT, "tools", "exit_codes.h")).read()
    codes = {k: int(v) for k, v in re.findall(r"constexpr int (k\w+) = (\d+);", header)}
    assert codes.keys() >= {"kOk", "kFailure", "kUsage", "kMismatch", "kSignalBase"}
    readme = open(os.path.join(ROOT, "README.md")).read()
    section = readme.split("### Errors and exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([\d /]+) \|", section, re.M)
    documented = {int(v) for row in rows for v in row.split("/")}
    for name, value in codes.items():
        if name == "kSignalBase":  # documented as 128 + the signal
            assert f"({value} + the signal)" in section
            assert {value + 2, value + 15} <= documented  # SIGINT, SIGTERM
        else:
            assert value in documented, (name, value)
