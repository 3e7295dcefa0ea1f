"""The PEP 517 build backend of the trainstep exporter package (named in
../pyproject.toml): writes a pure-Python wheel of ../trainstep/ and an
sdist of this folder, with the standard library alone.

Why not setuptools: pip builds a package in an isolated environment whose
build requirements it fetches from an index, so `pip install ./python`
would need the network (or --no-build-isolation, and then the setuptools
and wheel of whatever environment it is, which differ between Debian's
Python and a venv); and setuptools writes build/ and *.egg-info into the
source tree, which two test runs installing at once race on. This backend
needs nothing and writes only the wheel.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "trainstep"
SUMMARY = "Capture a PyTorch model's whole training step for the trainstep C++ runtime"
REQUIRES_PYTHON = ">=3.8"
# Not torch: in an environment without it pip would download a torch wheel
# of its own choosing (gigabytes, maybe the wrong CUDA build), and with it
# listed pip would also weigh Debian's python3-torch, which calls itself
# 1.13.0a0+gitunknown. The exporter needs an environment that has torch
# already, and says so in one line when it lacks it. xxhash is unversioned
# because Debian's python3-xxhash (3.2.0) calls itself 0.0.0; the
# checksums (xxh3_64) need 2.0 or later.
REQUIRES = ["numpy", "xxhash"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TAG = "py3-none-any"
# Fixed timestamps: the same sources give the same wheel, byte for byte.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def version():
    """trainstep/__init__.py's __version__, read without importing it."""
    with open(os.path.join(_ROOT, NAME, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if not m:
        raise RuntimeError(f"{NAME}/__init__.py sets no __version__ = \"...\"")
    return m.group(1)


def _files(folder):
    """The files under `folder` (relative to this package's root, with /),
    sorted, less caches and editor leftovers."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(_ROOT, folder)):
        dirnames[:] = [d for d in dirnames if d != "__pycache__" and not d.startswith(".")]
        for f in filenames:
            if f.endswith((".pyc", "~")) or f.startswith("."):
                continue
            out.append(os.path.relpath(os.path.join(dirpath, f), _ROOT).replace(os.sep, "/"))
    return sorted(out)


def metadata():
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version()}",
             f"Summary: {SUMMARY}", f"Requires-Python: {REQUIRES_PYTHON}"]
    lines += [f"Requires-Dist: {r}" for r in REQUIRES]
    return "\n".join(lines) + "\n"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _zip_add(zf, name, data):
    info = zipfile.ZipInfo(name, _ZIP_TIME)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    ver = version()
    dist_info = f"{NAME}-{ver}.dist-info"
    entries = []
    for rel in _files(NAME):
        with open(os.path.join(_ROOT, rel), "rb") as f:
            entries.append((rel, f.read()))
    wheel_meta = ("Wheel-Version: 1.0\nGenerator: trainstep_wheel\n"
                  f"Root-Is-Purelib: true\nTag: {_TAG}\n")
    entries.append((f"{dist_info}/METADATA", metadata().encode()))
    entries.append((f"{dist_info}/WHEEL", wheel_meta.encode()))
    record = [_record_line(n, d) for n, d in entries] + [f"{dist_info}/RECORD,,"]
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{NAME}-{ver}-{_TAG}.whl"
    # Written under a temporary name, so a failed build leaves no wheel.
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path + ".part", "w") as zf:
        for n, d in entries:
            _zip_add(zf, n, d)
    os.replace(path + ".part", path)
    return name


def build_sdist(sdist_directory, config_settings=None):
    ver = version()
    top = f"{NAME}-{ver}"
    name = f"{top}.tar.gz"
    members = [("PKG-INFO", metadata().encode())]
    for rel in ["pyproject.toml", *_files("_build_backend"), *_files(NAME)]:
        with open(os.path.join(_ROOT, rel), "rb") as f:
            members.append((rel, f.read()))
    path = os.path.join(sdist_directory, name)
    with tarfile.open(path + ".part", "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for rel, data in members:
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tf.addfile(info, io.BytesIO(data))
    os.replace(path + ".part", path)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
