"""Loads a torch.save'd file without running code from it.

Unpickling calls whatever callables the pickle names (os.system, eval, ...),
so a .pt file is a program unless its globals are restricted. This module is
a `pickle_module` whose Unpickler resolves only the globals a state dict
needs (tensors, storages, dtypes, plain containers) and refuses every other
one before it is imported or called.

torch 1.13's torch.load ignores `pickle_module` and its weights_only
unpickler cannot read floats (every optimizer state_dict has them), so
`load` drives torch's own readers (_load for zip files, _legacy_load for
the pre-1.6 format) with this module, exactly as torch.load would; where a
torch lacks them it falls back to torch.load(weights_only=True).
"""
import _compat_pickle
import io
import pickle
import re
from collections import OrderedDict

import torch
import torch.serialization as _ser

# What the pickled global is usually called (the module pickle records is
# where the object is defined: os.system lives in posix).
_PUBLIC = {"posix": "os", "nt": "os", "_operator": "operator", "_codecs": "codecs",
           "_io": "io", "_pickle": "pickle", "_functools": "functools"}

_REBUILD = ("_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_parameter",
            "_rebuild_parameter_with_state")
_ALLOWED = {
    ("collections", "OrderedDict"): OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("torch", "Size"): torch.Size,
    ("torch", "device"): torch.device,
    ("torch", "Tensor"): torch.Tensor,
    ("torch._tensor", "Tensor"): torch.Tensor,
    ("torch._tensor", "_rebuild_from_type_v2"): getattr(torch._tensor, "_rebuild_from_type_v2",
                                                        None),
    **{("torch._utils", n): getattr(torch._utils, n, None) for n in _REBUILD},
}


class RefusedGlobal(pickle.UnpicklingError):
    """The pickle names a global outside the allow-list."""

    def __init__(self, module, name):
        self.module, self.name = module, name
        super().__init__(f"refused global {module}.{name}")

    def describe(self):
        full = f"'{self.module}.{self.name}'"
        public = _PUBLIC.get(self.module)
        return f"{full} ({public}.{self.name})" if public else full


def _torch_attr(name):
    """torch.<name> where it is a dtype or a storage class, else None."""
    obj = getattr(torch, name, None)
    if isinstance(obj, torch.dtype):
        return obj
    if isinstance(obj, type) and name.endswith("Storage") and obj in _storage_classes():
        return obj
    return None


def _storage_classes():
    classes = set(getattr(torch, "_storage_classes", ()))
    classes.add(getattr(torch, "UntypedStorage", None))
    return classes


def _py3_name(module, name):
    """Protocol 0-2 pickles (torch.save's is 2) spell some globals as Python
    2 did (__builtin__.set); pickle's own find_class renames them so."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def find_global(module, name):
    """The allowed object `module.name`, else raises RefusedGlobal."""
    if not isinstance(module, str) or not isinstance(name, str):
        raise RefusedGlobal(str(module), str(name))
    module, name = _py3_name(module, name)
    obj = _ALLOWED.get((module, name))
    if obj is None and module == "torch":
        obj = _torch_attr(name)
    if obj is None:
        raise RefusedGlobal(module, name)
    return obj


class Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        return find_global(module, name)


def load_pickle(file, **kwargs):
    """pickle.load with the restricted Unpickler (torch's `pickle_module.load`)."""
    return Unpickler(file, **kwargs).load()


class TorchScriptFile(Exception):
    pass


def _has_private_readers():
    return all(hasattr(_ser, n) for n in ("_is_zipfile", "_open_zipfile_reader",
                                         "_is_torchscript_zip", "_load", "_legacy_load"))


class _Module:
    """The `pickle_module` handed to torch's readers."""
    __name__ = "trainstep.safe_pickle"
    Unpickler = Unpickler
    load = staticmethod(load_pickle)


def load(path):
    """The object torch.save wrote to `path`, on the CPU. Raises RefusedGlobal
    for a global outside the allow-list, TorchScriptFile for a TorchScript
    archive (code, which torch.load would hand to torch.jit.load)."""
    if not _has_private_readers():
        return _load_weights_only(path)
    with open(path, "rb") as f:
        if _ser._is_zipfile(f):
            with _ser._open_zipfile_reader(f) as z:
                if _ser._is_torchscript_zip(z):
                    raise TorchScriptFile()
                return _ser._load(z, "cpu", _Module, encoding="utf-8")
        # From memory, not the file: torch tries a real file as the
        # pre-0.4 tar format first, extracting its members (links too).
        return _ser._legacy_load(io.BytesIO(f.read()), "cpu", _Module, encoding="utf-8")


# torch 1.13-2.3 say "Unsupported global: GLOBAL m.n"; 2.4+ "Trying to load
# unsupported GLOBAL m.n whose module m is blocked".
_TORCH_REFUSAL = re.compile(r"(?:Unsupported global: GLOBAL|Unsupported class|unsupported GLOBAL) "
                            r"([\w.]+)")


def _load_weights_only(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        m = _TORCH_REFUSAL.search(str(e))
        if m:
            module, _, name = m.group(1).rpartition(".")
            raise RefusedGlobal(module, name) from None
        raise


def refusal(e):
    """The RefusedGlobal that caused `e`, if any (torch may wrap it)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, RefusedGlobal):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None
