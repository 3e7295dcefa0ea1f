"""The installed package: `cmake --install` into a fresh prefix, then
examples/cpp (a program of its own, public headers only) built against it
twice, through find_package(trainstep) (shared library) and through
pkg-config (static library), and trained 20 steps on Fashion-MNIST.

Oracles: both builds give bit-identical losses (same code, one thread);
the checkpoint the example writes loads in `trainstep eval`, and its test
loss is below the initial state's."""
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


def test_installed_package_trains_from_a_program_of_its_own(prefix, mnist_adadelta, tmp_path):
    # Only the package's own files: headers, libraries, CMake config, pkg-config.
    assert sorted(os.listdir(prefix / "include" / "trainstep"))
    assert os.path.exists(prefix / "lib" / "cmake" / "trainstep" / "trainstepConfig.cmake")
    assert os.access(prefix / "bin" / "trainstep", os.X_OK)

    cm = tmp_path / "cmake-build"
    sh("cmake", "-S", EXAMPLE, "-B", cm, f"-DCMAKE_PREFIX_PATH={prefix}")
    sh("cmake", "--build", cm)
    exe = cm / "train_mnist"
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


def test_version_is_the_package_version(prefix):
    from trainstep import __version__
    assert sh(prefix / "bin" / "trainstep", "--version").strip() == f"trainstep {__version__}"
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    assert sh("pkg-config", "--modversion", "trainstep", env=env).strip() == __version__
