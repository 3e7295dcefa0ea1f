"""Shared fixtures: the built binary, the exporter on sys.path, artifacts
exported once per session, and small IDX datasets cut from Fashion-MNIST."""
import gzip
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
SPECS = os.path.join(os.path.dirname(__file__), "specs")
BIN = os.environ.get("TRAINSTEP_BIN", os.path.join(ROOT, "build", "trainstep"))
FASHION = "/usr/share/datasets/fashion-mnist"


def pytest_configure(config):
    # Which run takes which tests (scripts/run-tests.sh): the pinned torch 2.x
    # runs them all; Debian's 1.13 skips `runtime` ones; the ASan build runs
    # only `asan` ones.
    config.addinivalue_line(
        "markers", "runtime: tests the C++ runtime on an artifact; which torch exported it "
        "changes nothing, so one torch runs it")
    config.addinivalue_line(
        "markers", "asan: in the named subset that `make test-asan` runs under ASan + UBSan")


def run(*args, check=True, timeout=600, env=None):
    """Runs build/trainstep, with `env` added to the environment; returns the
    CompletedProcess."""
    env = dict(os.environ, TRAINSTEP_PYTHON=sys.executable, **(env or {}))
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, env=env,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"trainstep {' '.join(map(str, args))} failed ({p.returncode}):\n"
                             f"{p.stdout}\n{p.stderr}")
    return p


def export(spec, out, golden_steps=None):
    args = ["export", spec, "--out", out]
    if golden_steps is not None:
        args += ["--golden-steps", golden_steps]
    run(*args)
    return out


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    """Lazily exported artifacts, shared by every test of the session."""
    d = tmp_path_factory.mktemp("artifacts")
    cache = {}

    def get(name, spec, golden_steps=None):
        if name not in cache:
            cache[name] = export(spec, str(d / f"{name}.tstep"), golden_steps)
        return cache[name]
    return get


@pytest.fixture(scope="session")
def mnist_adadelta(artifacts):
    return artifacts("mnist_adadelta", os.path.join(ROOT, "examples", "mnist", "spec.py"), 5)


@pytest.fixture(scope="session")
def char_transformer(artifacts):
    return artifacts("char_transformer", os.path.join(ROOT, "examples", "transformer", "spec.py"), 5)


@pytest.fixture(scope="session")
def char_lstm(artifacts):
    return artifacts("char_lstm", os.path.join(ROOT, "examples", "lstm", "spec.py"), 5)


def _write_idx(path, arr):
    import numpy as np
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.tobytes())


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def train_and_eval(art, small_data, ckpt):
    """One epoch of `art` on the small subset from C++ (saved to ckpt), then
    `trainstep eval` of it: (test loss, correct, test samples)."""
    import re
    data = f"idx:{small_data}"
    run("train", art, "--data", data, "--epochs", 1, "--threads", 1, "--save", ckpt)
    out = run("eval", art, "--data", data, "--checkpoint", ckpt).stdout
    m = re.search(r"test: loss ([0-9.]+), accuracy [0-9.]+% \((\d+)/(\d+)\)", out)
    assert m, out
    return float(m.group(1)), int(m.group(2)), int(m.group(3))


def held_out_images(small_data):
    """The subset's held-out images as the idx loader feeds them
    (normalised, N x 1 x 28 x 28 float32) and their int64 labels."""
    import torch
    x = torch.from_numpy(read_idx(f"{small_data}/t10k-images-idx3-ubyte.gz").copy()).float()
    y = torch.from_numpy(read_idx(f"{small_data}/t10k-labels-idx1-ubyte.gz").copy()).long()
    return ((x / 255.0 - 0.1307) / 0.3081).unsqueeze(1), y


def make_subset(dirpath, n_train, n_test):
    """An IDX folder holding the first n_train / n_test Fashion-MNIST samples."""
    os.makedirs(dirpath, exist_ok=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        for kind in ("images-idx3", "labels-idx1"):
            src = os.path.join(FASHION, f"{split}-{kind}-ubyte.gz")
            _write_idx(os.path.join(dirpath, f"{split}-{kind}-ubyte.gz"), read_idx(src)[:n])
    return dirpath


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    return make_subset(str(tmp_path_factory.mktemp("data")), 640, 300)
