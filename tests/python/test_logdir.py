"""Runs people can watch: train --log-dir writes TensorBoard event files that
tensorboard's own reader loads, with the same values as metrics.jsonl and
the lines the CLI printed; progress off a terminal is plain lines written as
they happen; on a terminal it is one bar redrawn in place."""
import glob
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import time

import pytest

from conftest import BIN, run

pytestmark = [pytest.mark.runtime, pytest.mark.asan]

EPOCHS, BATCHES = 2, 6


def _train(art, data, *extra, epochs=EPOCHS):
    return ["train", art, "--data", f"idx:{data}", "--threads", 1, "--epochs", epochs,
            "--max-batches", BATCHES, *extra]


def _f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def _jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_log_dir_reads_back_in_tensorboard(mnist_adadelta, small_data, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    logs = tmp_path / "runs" / "mnist"
    p = run(*_train(mnist_adadelta, small_data, "--log-dir", logs))

    events = glob.glob(str(logs / "events.out.tfevents.*.trainstep"))
    assert len(events) == 1, os.listdir(logs)
    acc = EventAccumulator(str(logs))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert tags == {"train/loss", "train/lr", "train/samples_per_s", "train/step_time_s",
                    "train/data_wait_s", "epoch/train_loss", "epoch/test_loss", "epoch/test_accuracy", "epoch/lr",
                    "epoch/samples_per_s"}, tags

    log = _jsonl(logs / "metrics.jsonl")
    batches = [e for e in log if e["event"] == "batch"]
    epochs = [e for e in log if e["event"] == "epoch"]
    assert len(epochs) == EPOCHS and len(batches) == EPOCHS * BATCHES  # 6 batches: each logged

    # TensorBoard's values are metrics.jsonl's, rounded to float32, at the same steps.
    def tb(tag):
        return [(s.step, s.value) for s in acc.Scalars(tag)]
    assert tb("train/loss") == [(e["step"], _f32(e["loss"])) for e in batches]
    assert tb("train/lr") == [(e["step"], _f32(e["lr"])) for e in batches]
    assert [s for s, _ in tb("train/step_time_s")] == [e["step"] for e in batches]
    assert all(v > 0 for _, v in tb("train/step_time_s") + tb("train/samples_per_s"))
    assert tb("train/data_wait_s") == [(e["step"], _f32(e["data_wait_s"])) for e in batches]
    assert all(0 <= e["data_wait_s"] <= e["seconds"] for e in epochs)
    assert [e["step"] for e in batches] == list(range(1, EPOCHS * BATCHES + 1))
    for key in ("train_loss", "test_loss", "test_accuracy", "lr"):
        assert tb("epoch/" + key) == [(e["step"], _f32(e[key])) for e in epochs], key
    assert [e["step"] for e in epochs] == [BATCHES, 2 * BATCHES]

    # ... and the CLI printed the same: progress lines (stderr), epoch lines (stdout).
    printed = re.findall(r"^epoch (\d+) \[(\d+)/(\d+)\] loss (\S+)$", p.stderr, re.M)
    assert printed == [(str(e["epoch"]), str(e["batch"] * 64), str(BATCHES * 64),
                        f"{e['loss']:.4f}") for e in batches], p.stderr
    summary = re.findall(r"^epoch (\d+): lr (\S+), train loss (\S+), test loss (\S+), "
                         r"test accuracy (\S+)%", p.stdout, re.M)
    assert summary == [(str(e["epoch"]), f"{e['lr']:.6g}", f"{e['train_loss']:.4f}",
                        f"{e['test_loss']:.4f}", f"{100 * e['test_accuracy']:.2f}")
                       for e in epochs], p.stdout


def test_log_dir_appends_across_a_resume(mnist_adadelta, small_data, tmp_path):
    logs, save = tmp_path / "logs", tmp_path / "m.ckpt"
    run(*_train(mnist_adadelta, small_data, "--log-dir", logs, "--save", save,
                "--checkpoint-every", 2, epochs=1))
    run(*_train(mnist_adadelta, small_data, "--log-dir", logs, "--save", save, "--resume", "auto"))
    log = _jsonl(logs / "metrics.jsonl")
    assert [e["epoch"] for e in log if e["event"] == "epoch"] == [1, 2]
    notes = [e for e in log if e["event"] == "note"]
    assert [(n["kind"], n["text"]) for n in notes] == [("resumed", f"resuming from {save}")]
    assert len(glob.glob(str(logs / "events.out.tfevents.*"))) == 2  # one per run


def test_unwritable_log_dir_is_one_clear_error(mnist_adadelta, small_data, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    p = run(*_train(mnist_adadelta, small_data, "--log-dir", blocker / "logs"), check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines == [f"trainstep: {blocker / 'logs'}: cannot create the log folder: Not a directory"], \
        p.stderr
    assert "epoch" not in p.stdout  # refused before training


def test_log_dir_is_in_the_help():
    out = run("train", "--help").stdout
    assert "--log-dir" in out and "tensorboard --logdir" in out, out


def test_off_a_terminal_lines_come_as_they_are_written(mnist_adadelta, tmp_path):
    # The full Fashion-MNIST train split, 60 batches: the run is still going
    # when its first lines arrive, so they were not held in a buffer.
    p = subprocess.Popen([BIN, "train", mnist_adadelta, "--threads", "1", "--max-batches", "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, TRAINSTEP_PYTHON=sys.executable))
    try:
        first_out = p.stdout.readline()
        assert first_out.startswith("training mnist_cnn: "), first_out
        assert p.poll() is None  # stdout is line-buffered under a pipe
        first_err = p.stderr.readline()
        assert re.fullmatch(r"epoch 1 \[384/3840\] loss \d+\.\d{4}\n", first_err), first_err
        assert p.poll() is None
        assert "\r" not in first_err
    finally:
        p.kill()
        p.wait()


def test_on_a_terminal_the_bar_is_redrawn_in_place(mnist_adadelta, small_data):
    master, slave = pty.openpty()
    start = time.monotonic()
    p = subprocess.Popen([BIN, *map(str, _train(mnist_adadelta, small_data))],
                         stdout=subprocess.PIPE, stderr=slave, text=True,
                         env=dict(os.environ, TRAINSTEP_PYTHON=sys.executable))
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = p.stdout.read()
    assert p.wait() == 0, out + seen.decode()
    elapsed = time.monotonic() - start
    tty = seen.decode().replace("\r\n", "\n")  # the terminal's own newline mapping
    bars = re.findall(r"\repoch (\d) \[[#.]{20}\] (\d+)/6 loss \d+\.\d{4}, [\d.]+ samples/s, "
                      r"ETA \d+:\d\d *", tty)
    assert bars, repr(tty)
    # Each epoch ends on its full bar and a newline; redraws are at most ~10 a second.
    for epoch in ("1", "2"):
        assert f"\repoch {epoch} [{'#' * 20}] 6/6 " in tty, repr(tty)
    assert tty.count("\n") == EPOCHS, repr(tty)
    assert len(bars) <= 10 * elapsed + 2 * EPOCHS, (len(bars), elapsed)
    assert "epoch 2: lr" in out  # the summaries still go to stdout
