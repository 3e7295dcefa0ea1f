"""Crash-safe training: a run killed at a random step (SIGKILL) and resumed
with --resume auto ends bit-identical to an uninterrupted run; SIGTERM and
SIGINT checkpoint and exit 143 / 130; a corrupt newest checkpoint is skipped;
non-finite steps stop with the tensor named or are skipped and counted;
--max-memory refuses a session that does not fit."""
import json
import os
import random
import re
import struct
import signal
import subprocess
import sys

import pytest
import torch

from conftest import BIN, run

pytestmark = [pytest.mark.runtime, pytest.mark.asan]

EPOCHS, BATCHES = 2, 6  # 12 steps over the small_data subset
STEPS = EPOCHS * BATCHES


def _args(art, data, save, *extra):
    return ["train", art, "--data", f"idx:{data}", "--threads", 1, "--epochs", EPOCHS,
            "--max-batches", BATCHES, "--lr-schedule", "step:1:0.7", "--save", save, *extra]


def _load(path):
    from trainstep import safetensors_io
    return safetensors_io.load(str(path))


def _assert_same_state(a, b):
    ta, ma = _load(a)
    tb, mb = _load(b)
    assert ta.keys() == tb.keys()
    for k in ta:
        assert torch.equal(ta[k], tb[k]), k
    assert ma["step"] == mb["step"] == str(STEPS)


def _epoch_lines(out):
    """{epoch: (train loss, test loss, accuracy)} from a train run's stdout."""
    return {int(m.group(1)): m.group(2, 3, 4) for m in re.finditer(
        r"epoch (\d+): lr \S+, train loss (\S+), test loss (\S+), test accuracy (\S+)", out)}


@pytest.fixture(scope="module")
def straight(mnist_adadelta, small_data, tmp_path_factory):
    """An uninterrupted run without periodic checkpoints: the reference."""
    save = tmp_path_factory.mktemp("straight") / "m.ckpt"
    out = run(*_args(mnist_adadelta, small_data, save)).stdout
    return save, _epoch_lines(out)


def _global_step(line):
    """Steps done, from a progress line 'epoch E [N/M] loss L' (64 per batch)."""
    m = re.match(r"epoch (\d+) \[(\d+)/\d+\]", line)
    return (int(m.group(1)) - 1) * BATCHES + int(m.group(2)) // 64 if m else None


def _start_until(args, step):
    """Starts `trainstep ARGS` and returns it once it reports `step` steps done."""
    p = subprocess.Popen([BIN, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ, TRAINSTEP_PYTHON=sys.executable))
    for line in p.stderr:
        s = _global_step(line)
        if s is not None and s >= step:
            return p
    raise AssertionError(f"the run ended before step {step}: {p.wait()}")


# Three kill points drawn at random (seeded, so a failure reproduces), in
# different epochs and between checkpoints (--checkpoint-every 3).
KILL_STEPS = sorted(random.Random(6).sample(range(1, STEPS), 3))


@pytest.mark.parametrize("kill_at", KILL_STEPS)
def test_sigkill_then_resume_auto_is_bit_identical(kill_at, straight, mnist_adadelta, small_data,
                                                    tmp_path):
    save = tmp_path / "m.ckpt"
    args = _args(mnist_adadelta, small_data, save, "--checkpoint-every", 3, "--keep", 2)
    p = _start_until(args, kill_at)
    p.kill()
    p.wait()
    assert p.returncode == -signal.SIGKILL
    assert not save.exists() or kill_at >= BATCHES  # killed before the end
    out = run(*args, "--resume", "auto")
    assert ("resuming from" in out.stderr) == (kill_at >= 3), out.stderr
    _assert_same_state(straight[0], save)
    # The epoch reports match too (a resumed epoch keeps its loss so far).
    for epoch, line in _epoch_lines(out.stdout).items():
        assert line == straight[1][epoch], (epoch, line, straight[1][epoch])


def test_sigterm_checkpoints_exits_143_and_resumes(straight, mnist_adadelta, small_data, tmp_path):
    save = tmp_path / "m.ckpt"
    args = _args(mnist_adadelta, small_data, save)  # no periodic checkpoints: only the signal's
    p = _start_until(args, 4)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 143, out
    m = re.search(r"interrupted by SIGTERM after step (\d+); checkpoint: (\S+)", out)
    assert m, out
    step, ckpt = int(m.group(1)), m.group(2)
    assert step >= 4 and os.path.dirname(ckpt) == str(tmp_path / "m.checkpoints")
    assert _load(ckpt)[1]["step"] == str(step)
    run(*args, "--resume", "auto")
    _assert_same_state(straight[0], save)


def test_sigint_exits_130_with_a_checkpoint(mnist_adadelta, small_data, tmp_path):
    save = tmp_path / "m.ckpt"
    p = _start_until(_args(mnist_adadelta, small_data, save), 2)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 130, out
    m = re.search(r"interrupted by SIGINT after step (\d+); checkpoint: (\S+)", out)
    assert m and _load(m.group(2))[1]["step"] == m.group(1), out


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])  # the header is fine, the data is not
    return None


def _flip_data_bit(path):
    """Flips one bit in the middle of the file's last tensor; returns its name."""
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + n])
    name, entry = max(((k, v) for k, v in header.items() if k != "__metadata__"),
                      key=lambda kv: kv[1]["data_offsets"][0])
    begin, end = entry["data_offsets"]
    d = bytearray(data)
    d[8 + n + (begin + end) // 2] ^= 0x10
    path.write_bytes(bytes(d))
    return name


@pytest.mark.parametrize("damage", [_truncate, _flip_data_bit], ids=["truncated", "bit-flip"])
def test_resume_auto_skips_a_corrupt_checkpoint(damage, straight, mnist_adadelta, small_data,
                                                tmp_path):
    save = tmp_path / "m.ckpt"
    args = _args(mnist_adadelta, small_data, save, "--checkpoint-every", 4, "--keep", 5)
    p = _start_until(args, 9)
    p.kill()
    p.wait()
    ckdir = tmp_path / "m.checkpoints"
    newest = max(ckdir.glob("step-*.ckpt"))
    tensor = damage(newest)
    out = run(*args, "--resume", "auto")
    assert f"warning: skipping checkpoint {newest}" in out.stderr, out.stderr
    if tensor:  # a flipped bit is named: file, tensor, checksums
        assert re.search(rf"{re.escape(str(newest))}: tensor '{re.escape(tensor)}' is corrupt: "
                         r"checksum [0-9a-f]{16}, expected [0-9a-f]{16}", out.stderr), out.stderr
    assert "resuming from" in out.stderr and f"resuming from {newest}" not in out.stderr
    _assert_same_state(straight[0], save)


def _first_param_output(art):
    """The first new parameter in train_step's output order (from the program)."""
    from trainstep import safetensors_io
    _, meta = safetensors_io.load(art)
    prog = json.loads(meta["program"])
    kinds = {s["name"]: s["kind"] for s in prog["state"]}
    return next(o["state"] for o in prog["functions"]["train_step"]["outputs"]
                if o["role"] == "state" and kinds[o["state"]] == "param")


# An infinite LR: the loss of step 0 is finite, every updated parameter is
# inf or NaN (lr * delta), the optimizer state (which does not use the LR) is
# finite. So the first non-finite tensor is the first parameter output.
def test_nonfinite_stop_names_the_step_and_tensor(mnist_adadelta, small_data):
    p = run("train", mnist_adadelta, "--data", f"idx:{small_data}", "--max-batches", 3,
            "--lr", "inf", check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    name = _first_param_output(mnist_adadelta)
    assert re.search(rf"trainstep: epoch 1, step 0: the new value of '{re.escape(name)}' \(param\) "
                     r"is -?(inf|nan) at element \d+", p.stderr), p.stderr


def test_nonfinite_skip_keeps_the_state_and_counts(mnist_adadelta, small_data, tmp_path):
    save = tmp_path / "m.ckpt"
    p = run("train", mnist_adadelta, "--data", f"idx:{small_data}", "--max-batches", 3,
            "--lr", "inf", "--on-nonfinite", "skip", "--save", save)
    assert "non-finite steps skipped: 3 of 3" in p.stdout, p.stdout
    from trainstep import safetensors_io
    init, _ = safetensors_io.load(mnist_adadelta)
    state, meta = safetensors_io.load(str(save))
    assert meta["nonfinite_skips"] == "3" and meta["step"] == "3"
    for k, v in state.items():  # every step was dropped: the initial state
        assert torch.equal(v, init[f"state/{k}"]), k


def test_skip_mode_trains_the_same_bits(straight, mnist_adadelta, small_data, tmp_path):
    save = tmp_path / "m.ckpt"
    run(*_args(mnist_adadelta, small_data, save, "--on-nonfinite", "skip"))
    _assert_same_state(straight[0], save)


def test_max_memory_names_the_size_needed(mnist_adadelta):
    p = run("verify", mnist_adadelta, "--max-memory", "20M", check=False)
    assert p.returncode == 1
    assert re.fullmatch(r"trainstep: \S+: the session needs [0-9.]+ MiB \(\d+ bytes: state .*\), "
                        r"more than the memory limit of 20.00 MiB \(20971520 bytes, --max-memory\)\n",
                        p.stderr), p.stderr
    need = int(re.search(r"\((\d+) bytes:", p.stderr).group(1))
    assert "verify: ok" in run("verify", mnist_adadelta, "--max-memory", need).stdout


def test_save_makes_its_folder_before_training(mnist_adadelta, small_data, tmp_path):
    """--save into folders that do not exist yet makes them; one that
    cannot be made fails before the first step, naming it."""
    save = tmp_path / "runs" / "today" / "m.ckpt"
    run("train", mnist_adadelta, "--data", f"idx:{small_data}", "--max-batches", 1,
        "--save", save)
    assert save.exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    p = run("train", mnist_adadelta, "--data", f"idx:{small_data}", "--max-batches", 1,
            "--save", blocker / "m.ckpt", check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"trainstep: {blocker}: cannot create the checkpoint folder" in p.stderr, p.stderr
    assert "epoch 1" not in p.stdout  # not a step was taken
