"""The exporter as a package (docs/python.md, "Install the exporter
into your environment"): `pip install ./python` into a throwaway environment that has
torch, with no index; `python -m trainstep export` there, from outside the
repo; which exporter the binary runs; and the binary and the exporter
refusing each other across versions. Runs under either interpreter of the
suite (Debian's with torch 1.13, the torch 2.x venv)."""
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

import pytest

from conftest import BIN as _BIN, ROOT, SPECS

import trainstep

BIN = os.path.abspath(_BIN)  # the tests run in folders of their own
PKG = os.path.join(ROOT, "python")
sys.path.insert(0, os.path.join(PKG, "_build_backend"))
import trainstep_wheel  # noqa: E402


def _env(**extra):
    """This process's environment less what would point Python, pip or the
    binary somewhere: each test says what it means."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "TRAINSTEP_", "PIP_", "VIRTUAL_ENV"))}
    env.update(extra)
    return env


def _sh(args, cwd, env=None, timeout=300):
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env or _env(),
                          capture_output=True, text=True, timeout=timeout)


def _ok(p):
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p


def _one_line(p, *needles, code=1):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def make_env(root):
    """A new venv at `root` that sees this interpreter's packages (torch,
    numpy, xxhash, pip) but not the repo; returns its python."""
    if sys.prefix == sys.base_prefix:  # a system Python (Debian's): as a user would
        _ok(_sh([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", root],
                cwd=root.parent))
        return root / "bin" / "python"
    # From a venv, --system-site-packages would link the base interpreter's
    # packages, not this venv's: a .pth adds this one's instead.
    _ok(_sh([sys.executable, "-m", "venv", "--without-pip", root], cwd=root.parent))
    py = root / "bin" / "python"
    purelib = _ok(_sh([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                      cwd=root)).stdout.strip()
    dirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with open(os.path.join(purelib, "outer-env.pth"), "w") as f:
        f.writelines(f"import site; site.addsitedir({d!r})\n" for d in sorted(dirs))
    return py


def _tree(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder)
                  for d, dirs, files in os.walk(folder) if "__pycache__" not in d for f in files)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A venv with the exporter pip-installed from ./python: no index, pip's
    isolated build (the default). Returns (its python, the work folder)."""
    work = tmp_path_factory.mktemp("pkg")
    py = make_env(work / "venv")
    before = _tree(PKG)
    p = _sh([py, "-m", "pip", "install", "--no-index", "--no-cache-dir",
             "--disable-pip-version-check", "--no-input", "-q", PKG], cwd=work)
    _ok(p)
    assert _tree(PKG) == before, "the install wrote into the source tree"
    return py, work


def test_import_resolves_to_the_installed_copy(installed):
    py, work = installed
    p = _ok(_sh([py, "-c", "import sys, trainstep, trainstep.exporter, torch; "
                 "print(trainstep.__file__); print(trainstep.__version__); print(sys.prefix)"],
                cwd=work))
    where, version, prefix = p.stdout.split()
    assert where.startswith(prefix + os.sep) and not where.startswith(PKG), where
    assert version == trainstep.__version__


def test_module_export_from_outside_the_repo(installed):
    """The binary found on PATH; the artifact checks, inspects and
    verifies against the environment's eager torch."""
    py, work = installed
    spec = shutil.copy(os.path.join(SPECS, "tiny_mlp.py"), work / "tiny_mlp.py")
    path = os.path.dirname(os.path.abspath(BIN)) + os.pathsep + os.environ.get("PATH", "")
    p = _ok(_sh([py, "-m", "trainstep", "export", os.path.basename(spec), "--out", "tiny.tstep"],
                cwd=work, env=_env(PATH=path)))
    assert "exported tiny.tstep: tiny_mlp" in p.stdout, p.stdout
    _ok(_sh([BIN, "check", "tiny.tstep"], cwd=work))
    assert "tiny_mlp" in _ok(_sh([BIN, "inspect", "tiny.tstep"], cwd=work)).stdout
    _ok(_sh([BIN, "verify", "tiny.tstep"], cwd=work))


def test_module_export_without_a_binary_says_how_to_point_at_it(installed, tmp_path):
    py, _ = installed
    path = "/usr/bin:/bin"
    if shutil.which("trainstep", path=path):
        pytest.skip("a trainstep binary is installed in /usr/bin or /bin")
    p = _sh([py, "-m", "trainstep", "export", os.path.join(SPECS, "tiny_mlp.py"), "--out",
             tmp_path / "x.tstep"], cwd=tmp_path, env=_env(PATH=path))
    _one_line(p, "trainstep export: cannot find the trainstep binary", "PATH",
              "TRAINSTEP_BIN=")
    assert not (tmp_path / "x.tstep").exists()


def test_module_export_refuses_a_binary_of_another_version(installed, tmp_path):
    py, _ = installed
    fake = tmp_path / "trainstep"
    fake.write_text("#!/bin/sh\necho '{\"version\": 1, \"trainstep_version\": \"9.9.9\", "
                    "\"ops\": []}'\n")
    fake.chmod(0o755)
    p = _sh([py, "-m", "trainstep", "export", os.path.join(SPECS, "tiny_mlp.py"), "--out",
             tmp_path / "x.tstep"], cwd=tmp_path, env=_env(TRAINSTEP_BIN=str(fake)))
    _one_line(p, f"the trainstep binary {fake} is version 9.9.9",
              f"is {trainstep.__version__}")


def test_module_usage_and_version(installed):
    py, work = installed
    _ok(p := _sh([py, "-m", "trainstep", "--version"], cwd=work))
    assert p.stdout.startswith(f"trainstep {trainstep.__version__} (exporter, "), p.stdout
    assert "export SPEC.py" in _ok(_sh([py, "-m", "trainstep", "--help"], cwd=work)).stdout
    _one_line(_sh([py, "-m", "trainstep", "train"], cwd=work), "unknown command 'train'", code=2)
    assert _sh([py, "-m", "trainstep"], cwd=work).returncode == 2


def test_binary_version_is_the_package_version():
    p = _ok(_sh([BIN, "--version"], cwd=ROOT))
    assert p.stdout.strip() == f"trainstep {trainstep.__version__}"


def test_binary_runs_the_installed_exporter_when_asked(installed, tmp_path):
    """TRAINSTEP_PYTHONPATH=installed: the environment's own package, which
    a bare environment lacks (one line saying how to install it)."""
    py, _ = installed
    spec = os.path.join(SPECS, "tiny_mlp.py")
    env = _env(TRAINSTEP_PYTHON=str(py), TRAINSTEP_PYTHONPATH="installed")
    _ok(_sh([BIN, "export", spec, "--out", tmp_path / "x.tstep"], cwd=tmp_path, env=env))
    bare = make_env(tmp_path / "bare")
    p = _sh([BIN, "export", spec, "--out", tmp_path / "y.tstep"], cwd=tmp_path,
            env=dict(env, TRAINSTEP_PYTHON=str(bare)))
    _one_line(p, f"{bare} cannot import the trainstep exporter", "pip install ./python")


def test_binary_refuses_an_exporter_of_another_version(tmp_path):
    other = tmp_path / "other"
    shutil.copytree(os.path.join(PKG, "trainstep"), other / "trainstep",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = other / "trainstep" / "__init__.py"
    init.write_text(re.sub(r'^__version__ = ".*"$', '__version__ = "9.9.9"', init.read_text(),
                           flags=re.M))
    env = _env(TRAINSTEP_PYTHON=sys.executable, TRAINSTEP_PYTHONPATH=str(other))
    p = _sh([BIN, "export", os.path.join(SPECS, "tiny_mlp.py"), "--out", tmp_path / "x.tstep"],
            cwd=tmp_path, env=env)
    _one_line(p, f"is version {trainstep.__version__} but the exporter in "
                 f"{other / 'trainstep'} is 9.9.9")


# --- the build backend itself ---------------------------------------------

def test_wheel_is_complete_and_reproducible(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    name = trainstep_wheel.build_wheel(str(tmp_path / "a"))
    assert name == f"trainstep-{trainstep.__version__}-py3-none-any.whl"
    assert trainstep_wheel.build_wheel(str(tmp_path / "b")) == name
    data = (tmp_path / "a" / name).read_bytes()
    assert data == (tmp_path / "b" / name).read_bytes()
    with zipfile.ZipFile(tmp_path / "a" / name) as zf:
        names = set(zf.namelist())
        dist = f"trainstep-{trainstep.__version__}.dist-info"
        sources = {f"trainstep/{f}" for f in os.listdir(os.path.join(PKG, "trainstep"))
                   if f.endswith(".py")}
        assert sources <= names and "trainstep/__main__.py" in names
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
        record = zf.read(f"{dist}/RECORD").decode().splitlines()
        assert {line.split(",")[0] for line in record} == names
        for line in record:
            n, digest, size = line.split(",")
            if n.endswith("RECORD"):
                continue
            body = zf.read(n)
            want = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=")
            assert digest == "sha256=" + want.decode() and int(size) == len(body), n
        meta = zf.read(f"{dist}/METADATA").decode()
    assert f"Version: {trainstep.__version__}\n" in meta
    requires = re.findall(r"^Requires-Dist: (\S+)", meta, re.M)
    assert requires == ["numpy", "xxhash"]  # torch deliberately not (see the backend)


def test_sdist_builds_itself(tmp_path):
    name = trainstep_wheel.build_sdist(str(tmp_path))
    top = f"trainstep-{trainstep.__version__}"
    with tarfile.open(tmp_path / name) as tf:
        tf.extractall(tmp_path)
    for f in ("pyproject.toml", "PKG-INFO", "_build_backend/trainstep_wheel.py",
              "trainstep/__init__.py", "trainstep/__main__.py"):
        assert (tmp_path / top / f).is_file(), f
    # The unpacked sdist builds the same wheel.
    p = _ok(_sh([sys.executable, "-c", "import sys; sys.path.insert(0, '_build_backend'); "
                 "import trainstep_wheel as b; print(b.build_wheel(sys.argv[1]))", tmp_path],
                cwd=tmp_path / top))
    built = tmp_path / p.stdout.strip()
    (tmp_path / "here").mkdir()
    assert built.read_bytes() == (tmp_path / "here" / trainstep_wheel.build_wheel(
        str(tmp_path / "here"))).read_bytes()
