"""The installed package: `cmake --install` into a fresh prefix, then
examples/cpp (programs of their own, public headers only) built against it.
train_mnist is built twice, through find_package(trainstep) (shared
library) and through pkg-config (static library), and trained 20 steps on
Fashion-MNIST; train_epochs runs ts::train on a Dataset class of its own.

Oracles: both train_mnist builds give bit-identical losses (same code, one
thread); the checkpoint it writes loads in `trainstep eval`, and its test
loss is below the initial state's. train_epochs' epoch report is the one
`trainstep train` logs for the same run (the same loop on the built-in
dataset), to the last bit, and so is its checkpoint's evaluation."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import BIN, FASHION, ROOT, run

BUILD = os.path.dirname(os.path.abspath(BIN))
EXAMPLE = os.path.join(ROOT, "examples", "cpp")


def _cache(key):
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        return None
    return ""


def sh(*args, **kw):
    p = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=600, **kw)
    assert p.returncode == 0, f"{' '.join(map(str, args))} failed:\n{p.stdout}\n{p.stderr}"
    return p.stdout


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if _cache("CMAKE_BUILD_TYPE") is None:
        pytest.skip(f"{BUILD} is not a CMake build folder")
    if _cache("TRAINSTEP_SANITIZE"):
        pytest.skip("a sanitizer build: its library needs the sanitizer runtime in the program")
    p = tmp_path_factory.mktemp("prefix")
    sh("cmake", "--install", BUILD, "--prefix", p)
    return p


def losses(out):
    got = [float(m) for m in re.findall(r"^step \d+ loss (\S+)$", out, re.M)]
    assert len(got) == 20, out
    return got


@pytest.fixture(scope="module")
def examples(prefix, tmp_path_factory):
    """examples/cpp built against the installed package through find_package."""
    cm = tmp_path_factory.mktemp("cmake-build")
    sh("cmake", "-S", EXAMPLE, "-B", cm, f"-DCMAKE_PREFIX_PATH={prefix}")
    sh("cmake", "--build", cm)
    return cm


def test_installed_package_trains_from_a_program_of_its_own(prefix, examples, mnist_adadelta,
                                                            tmp_path):
    # Only the package's own files: headers, libraries, CMake config, pkg-config.
    assert sorted(os.listdir(prefix / "include" / "trainstep"))
    assert os.path.exists(prefix / "lib" / "cmake" / "trainstep" / "trainstepConfig.cmake")
    assert os.access(prefix / "bin" / "trainstep", os.X_OK)

    exe = examples / "train_mnist"
    assert str(prefix) in sh("ldd", exe)  # the installed libtrainstep.so, not the build's

    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = sh("pkg-config", "--cflags", "--libs", "--static", "trainstep", env=env).split()
    static = tmp_path / "train_mnist_static"
    sh("g++", "-O2", os.path.join(EXAMPLE, "train_mnist.cpp"), "-o", static,
       "-Wl,-Bstatic", *[f for f in flags if f == "-ltrainstep"], "-Wl,-Bdynamic",
       *[f for f in flags if f != "-ltrainstep"], "-lz")
    assert "libtrainstep" not in sh("ldd", static)

    ckpt = tmp_path / "example.ckpt"
    shared_losses = losses(sh(exe, mnist_adadelta, FASHION, 20, ckpt))
    assert losses(sh(static, mnist_adadelta, FASHION, 20)) == shared_losses
    assert sum(shared_losses[-5:]) < sum(shared_losses[:5])

    def test_loss(*extra):
        out = run("eval", mnist_adadelta, "--data", "fashion-mnist", "--threads", "1", *extra).stdout
        return float(re.search(r"loss ([0-9.]+)", out).group(1))
    assert test_loss("--checkpoint", ckpt) < test_loss()


def test_public_epoch_loop_on_a_dataset_of_its_own_matches_the_cli(examples, mnist_adadelta,
                                                                     tmp_path):
    save = tmp_path / "epochs.ckpt"
    out = sh(examples / "train_epochs", mnist_adadelta, FASHION, 1, 40, save)
    m = re.search(r"^epoch 1 train_loss (\S+) test_loss (\S+) test_accuracy (\S+)$", out, re.M)
    assert m, out
    assert "trained 1 epochs to step 40" in out

    logs = tmp_path / "logs"
    cli = tmp_path / "cli.ckpt"
    run("train", mnist_adadelta, "--data", "fashion-mnist", "--epochs", 1, "--max-batches", 40,
        "--threads", 1, "--log-dir", logs, "--save", cli)
    epochs = [r for r in map(json.loads, open(logs / "metrics.jsonl")) if r["event"] == "epoch"]
    assert len(epochs) == 1, epochs
    want = epochs[0]
    assert [float(v) for v in m.groups()] == [want["train_loss"], want["test_loss"],
                                               want["test_accuracy"]]

    def evaluated(ckpt):
        return run("eval", mnist_adadelta, "--data", "fashion-mnist", "--threads", "1",
                   "--checkpoint", ckpt).stdout
    assert evaluated(save) == evaluated(cli)


def test_each_installed_header_compiles_alone(prefix):
    # Public headers may include only each other and the standard library:
    # with the prefix as the only include path, an internal one cannot resolve.
    headers = sorted((prefix / "include" / "trainstep").glob("*.h"))
    assert {h.name for h in headers} >= {"session.h", "train.h", "dataset.h", "collective.h"}
    for h in headers:
        sh("g++", "-std=c++17", "-fsyntax-only", "-I", prefix / "include", "-x", "c++", h)


def test_version_is_the_package_version(prefix):
    from trainstep import __version__
    assert sh(prefix / "bin" / "trainstep", "--version").strip() == f"trainstep {__version__}"
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    assert sh("pkg-config", "--modversion", "trainstep", env=env).strip() == __version__
