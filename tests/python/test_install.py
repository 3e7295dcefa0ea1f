"""The installed package: `cmake --install` into a fresh prefix, then
examples/cpp (programs of their own, public headers only) built against it.
train_mnist is built twice, through find_package(trainstep) (shared
library) and through pkg-config (static library), and trained 20 steps on
Fashion-MNIST; train_epochs runs ts::train on a Dataset class of its own; a
program written here verifies an artifact through ts::verify.

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

pytestmark = [pytest.mark.runtime]

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


# A program of its own that verifies an artifact through ts::verify
# (trainstep/verify.h): each failed check, then the report's verdict.
VERIFY_PROGRAM = r"""
#include <trainstep/verify.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  ts::VerifyOptions o;
  o.session.threads = 1;
  if (argc > 2) o.tol = std::atof(argv[2]);
  try {
    const ts::VerifyReport r = ts::verify(argv[1], o);
    for (const ts::VerifyCheck& c : r.checks)
      if (!c.ok) std::printf("mismatch %s of_scale %g tol %g\n", c.name.c_str(), c.of_scale, c.tol);
    std::printf("%zu checks: %s\n", r.checks.size(),
                r.ok() ? "ok" : ("FAILED " + r.failure).c_str());
    return r.ok() ? 0 : 3;
  } catch (const ts::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
"""


def test_installed_package_verifies_an_artifact_from_a_program_of_its_own(prefix, mnist_adadelta,
                                                                           tmp_path):
    src = tmp_path / "verify_artifact.cpp"
    src.write_text(VERIFY_PROGRAM)
    exe = tmp_path / "verify_artifact"
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = sh("pkg-config", "--cflags", "--libs", "trainstep", env=env).split()
    sh("g++", "-O2", src, "-o", exe, *flags, f"-Wl,-rpath,{prefix / 'lib'}")

    def verify(*args):
        p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=600)
        return p.returncode, p.stdout.strip().splitlines()

    # As many checks as the CLI prints lines for, and the same verdict.
    rc, out = verify(mnist_adadelta)
    cli = run("verify", mnist_adadelta, "--threads", "1").stdout.splitlines()
    checks = [l for l in cli if l.startswith("  ") and l.endswith((" ok", " MISMATCH"))]
    assert (rc, out) == (0, [f"{len(checks)} checks: ok"])

    # A mismatch is a report, not a crash: a golden tensor moved (as in
    # test_parity.py), and a tolerance no float32 step meets.
    from trainstep import safetensors_io
    tensors, meta = safetensors_io.load(mnist_adadelta)
    tensors["golden/final/fc2.bias"] = tensors["golden/final/fc2.bias"] + 1e-2
    bad = tmp_path / "bad.tstep"
    safetensors_io.save(str(bad), tensors, meta)
    rc, out = verify(bad)
    assert rc == 3 and out[-1] == f"{len(checks)} checks: FAILED state fc2.bias", out
    assert out[:-1] and all(" state fc2.bias " in l for l in out[:-1]), out
    rc, out = verify(mnist_adadelta, "1e-12")
    first = run("verify", mnist_adadelta, "--threads", "1", "--tol", "1e-12", check=False)
    assert first.returncode == 3
    assert rc == 3 and out[-1] == f"{len(checks)} checks: " + first.stdout.splitlines()[-1][8:]
    assert len(out) > 2, out

    # What cannot be compared at all is a ts::Error.
    rc, out = verify(tmp_path / "missing.tstep")
    assert rc == 1 and out[0].startswith("error: ") and "missing.tstep" in out[0], out


def test_each_installed_header_compiles_alone(prefix):
    # Public headers may include only each other and the standard library:
    # with the prefix as the only include path, an internal one cannot resolve.
    headers = sorted((prefix / "include" / "trainstep").glob("*.h"))
    assert {h.name for h in headers} >= {"session.h", "train.h", "dataset.h", "collective.h",
                                         "verify.h", "lr_schedule.h", "metrics.h",
                                         "file.h", "check.h"}
    for h in headers:
        sh("g++", "-std=c++17", "-fsyntax-only", "-I", prefix / "include", "-x", "c++", h)


def test_version_is_the_package_version(prefix):
    from trainstep import __version__
    assert sh(prefix / "bin" / "trainstep", "--version").strip() == f"trainstep {__version__}"
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    assert sh("pkg-config", "--modversion", "trainstep", env=env).strip() == __version__
