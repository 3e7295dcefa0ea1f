"""import-checkpoint runs no code from a PyTorch file: a pickle that names
any global outside tensors and plain containers is refused before the
global is even imported, in each of torch.save's formats (zip, the pre-1.6
legacy format) and for a bare pickle; state dicts still load."""
import functools
import os
import pickle
import subprocess

import pytest
import torch

from conftest import SPECS, run

pytestmark = [pytest.mark.asan]
from trainstep import safe_pickle, safetensors_io

ART_SPEC = os.path.join(SPECS, "interop_adamw.py")


class _Payload:
    """Unpickling it calls `call(*args)`."""

    def __init__(self, call, args):
        self.call, self.args = call, args

    def __reduce__(self):
        return self.call, self.args


def _payloads(marker):
    """(name, the global the pickle names first, payload): each would create
    `marker` when unpickled."""
    touch = f"touch {marker}"
    return {
        "os.system": (os.system, _Payload(os.system, (touch,))),
        "subprocess.Popen": (subprocess.Popen, _Payload(subprocess.Popen, (["touch", str(marker)],))),
        "builtins.eval": (eval, _Payload(eval, (f"open({str(marker)!r}, 'w').close()",))),
        # The pickle builds the partial first, then calls it.
        "functools.partial": (functools.partial,
                              _Payload(functools.partial(os.system, touch), ())),
    }


def _global_name(obj):
    return f"{obj.__module__}.{obj.__qualname__}"


def _write(path, obj, fmt):
    if fmt == "zip":
        torch.save(obj, path)
    elif fmt == "legacy":
        torch.save(obj, path, _use_new_zipfile_serialization=False)
    else:  # a bare pickle, protocol 4 (STACK_GLOBAL)
        with open(path, "wb") as f:
            pickle.dump(obj, f, protocol=4)


def _hostile(tmp_path, which, fmt):
    marker = tmp_path / "PWNED"
    target, payload = _payloads(marker)[which]
    evil = tmp_path / "evil.pt"
    _write(evil, {"model": {"fc1.weight": payload}}, fmt)
    return evil, marker, _global_name(target)


@pytest.mark.parametrize("which,fmt", [
    ("os.system", "zip"), ("subprocess.Popen", "zip"), ("builtins.eval", "zip"),
    ("functools.partial", "zip"), ("os.system", "legacy"), ("os.system", "raw"),
])
def test_hostile_pickle_is_refused_without_side_effect(artifacts, tmp_path, which, fmt):
    art = artifacts("interop_adamw", ART_SPEC)
    evil, marker, name = _hostile(tmp_path, which, fmt)
    out = tmp_path / "x.ckpt"
    p = run("import-checkpoint", art, evil, "--out", out, check=False)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"{evil}: refused to load: the pickle would build '{name}'" in lines[0], lines[0]
    assert not marker.exists(), "the payload ran"
    assert not out.exists()


def test_loader_refuses_before_importing(tmp_path):
    """The refusal names the global without resolving it: a module that does
    not exist is refused the same way (nothing was imported)."""
    import pickletools
    evil = tmp_path / "evil.pt"
    _write(evil, {"model": _Payload(os.system, ("true",))}, "raw")
    data = evil.read_bytes().replace(b"posix", b"nomod")
    assert b"nomod" in data and any(op.name == "STACK_GLOBAL" for op, _, _ in
                                    pickletools.genops(data))
    evil.write_bytes(data)
    with pytest.raises(safe_pickle.RefusedGlobal) as e:
        safe_pickle.load(str(evil))
    assert (e.value.module, e.value.name) == ("nomod", "system")


def test_torch_weights_only_fallback_names_the_global(tmp_path):
    """Where torch lacks the readers safe_pickle drives, torch.load
    (weights_only=True) refuses, and its message is turned into the same
    RefusedGlobal."""
    evil, marker, _ = _hostile(tmp_path, "os.system", "zip")
    with pytest.raises(safe_pickle.RefusedGlobal) as e:
        safe_pickle._load_weights_only(str(evil))
    assert e.value.describe() == "'posix.system' (os.system)"
    assert not marker.exists()


@pytest.mark.parametrize("fmt", ["zip", "legacy"])
def test_state_dicts_load_in_each_format(tmp_path, fmt):
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(m.parameters(), lr=0.1, betas=(0.8, 0.9))
    m(torch.randn(4, 3)).sum().backward()
    opt.step()
    d = {"model": m.state_dict(), "optimizer": opt.state_dict()}
    path = tmp_path / "ok.pt"
    _write(path, d, fmt)
    got = safe_pickle.load(str(path))
    assert got["optimizer"]["param_groups"] == d["optimizer"]["param_groups"]
    for k, t in d["model"].items():
        assert torch.equal(got["model"][k], t), k
    for i, st in d["optimizer"]["state"].items():
        for k, t in st.items():
            assert torch.equal(got["optimizer"]["state"][i][k], t), (i, k)


def test_legacy_format_imports_like_zip(artifacts, tmp_path):
    from trainstep.exporter import load_spec
    art = artifacts("interop_adamw", ART_SPEC)
    spec = load_spec(ART_SPEC)
    d = {"model": spec.model.state_dict(), "optimizer": spec.optimizer.state_dict()}
    got = {}
    for fmt in ("zip", "legacy"):
        src, out = tmp_path / f"{fmt}.pt", tmp_path / f"{fmt}.ckpt"
        _write(src, d, fmt)
        run("import-checkpoint", art, src, "--out", out)
        got[fmt] = safetensors_io.load(str(out))
    assert got["zip"][1] == got["legacy"][1]
    assert got["zip"][0].keys() == got["legacy"][0].keys()
    for k, t in got["zip"][0].items():
        assert torch.equal(got["legacy"][0][k], t), k


def test_torchscript_archive_is_refused(artifacts, tmp_path):
    art = artifacts("interop_adamw", ART_SPEC)
    ts_file = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(ts_file))
    p = run("import-checkpoint", art, ts_file, "--out", tmp_path / "x.ckpt", check=False)
    assert p.returncode == 1
    assert p.stderr.strip() == (f"trainstep: import-checkpoint: {ts_file}: is a TorchScript "
                                "archive (torch.jit.save), which holds code; trainstep reads "
                                "only torch.save'd state dicts"), p.stderr


def test_a_whole_pickled_module_is_refused(tmp_path):
    """torch.save(model) pickles the class: refused, named; state_dict() is
    what to save."""
    m = torch.nn.Linear(2, 2)
    path = tmp_path / "model.pt"
    torch.save(m, path)
    with pytest.raises(safe_pickle.RefusedGlobal) as e:
        safe_pickle.load(str(path))
    assert (e.value.module, e.value.name) == (type(m).__module__, type(m).__qualname__)


def test_the_pre_0_4_tar_format_is_not_extracted(tmp_path, monkeypatch):
    """torch would extract a tar's members (symlinks too) to a temp folder;
    safe_pickle reads the legacy format from memory, so tar never opens."""
    import tarfile

    def refuse(*a, **k):
        raise AssertionError("tarfile.open was called")
    path = tmp_path / "old.pt"
    with tarfile.open(path, "w") as tar:
        for name in ("storages", "tensors", "pickle"):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/hostname"
            tar.addfile(info)
    monkeypatch.setattr(tarfile, "open", refuse)
    with pytest.raises(Exception) as e:
        safe_pickle.load(str(path))
    assert not isinstance(e.value, AssertionError), e.value
