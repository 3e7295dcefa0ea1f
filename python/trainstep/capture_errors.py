"""Errors torch raises while it traces the step, said in one line: the
cause, the user's FILE:LINE that did it, and the way out (docs/reliability.md,
"Errors"); what checks.py refuses is said the same way, with the
user-frame helpers here.

make_fx traces the step with real tensors. What it cannot capture ends in a
RuntimeError deep inside torch, worded differently by 1.13 and 2.x, or in
nothing at all: a value silently baked into the graph. So each class is
caught where it happens, the same way on both. Here: data-dependent control
flow and value reads (`if x.sum() > 0`, .item(), .tolist(),
float/int/bool(t)): while trace.trace runs, Tensor's reading methods tag
the exception torch raises with the user's frame (`translated`); torch's
"value out of a tracing tensor" is the fallback for reads inside torch ops
(torch.equal). Data-dependent shapes, writes into the example batch and
tensor subclasses are checks.py's.
"""
import contextlib
import dis
import functools
import linecache
import os
import sys
import sysconfig

import torch

# The error types live in errors.py (a leaf module batch.py also uses).
from .errors import (BatchLayoutError, CaptureError, DataDependentError,  # noqa: F401
                     InputWriteError, TensorSubclassError)


def _dirs(*modules):
    return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in modules)


def _not_user_dirs():
    dirs = _dirs(torch, contextlib)
    try:
        import functorch
        dirs += _dirs(functorch)
    except ImportError:
        pass
    return dirs


def _path(key):
    return os.path.abspath(sysconfig.get_paths()[key]) + os.sep


_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep
_NOT_USER = _not_user_dirs()
_STDLIB = (_path("stdlib"), _path("platstdlib"))
_SITE = (_path("purelib"), _path("platlib"))  # may lie inside the stdlib's folder


def _is_user(name):
    """Whether a frame's file is the user's: not torch, functorch, the
    standard library (packages installed next to it are the user's) or
    generated code (<string>, FX's <eval_with_key>)."""
    if name.startswith(_NOT_USER) or name.startswith("<"):
        return False
    return not name.startswith(_STDLIB) or name.startswith(_SITE)


_MAX_CODE = 80


def _user_frame(f):
    """The innermost frame from f outwards in the user's code, or None when
    trainstep's own code comes first (what it calls is not the user's doing)."""
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(_OURS):
            return None
        if _is_user(name):
            return f
        f = f.f_back
    return None


def _code(file, line):
    text = linecache.getline(file, line).strip()
    return text if len(text) <= _MAX_CODE else text[:_MAX_CODE - 3].rstrip() + "..."


def _quoted(file, line):
    code = _code(file, line) if file else ""
    return f"`{code}`" if code else "this line"


# --- data-dependent control flow and value reads -------------------------

_TAG = "_trainstep_read"
# Tensor's methods that hand a value to Python: what the user's line does,
# and the short name for a call made inside torch on its behalf.
_READS = {"__bool__": ("calls bool()", "bool()"), "item": ("calls .item()", ".item()"),
          "tolist": ("calls .tolist()", ".tolist()"), "__float__": ("calls float()", "float()"),
          "__int__": ("calls int()", "int()"), "__complex__": ("calls complex()", "complex()"),
          "numpy": ("calls .numpy()", ".numpy()"),
          "__index__": ("uses a tensor as a Python int (an index, slice or range bound)",
                        "as a Python int")}


def _deciding(frame):
    """Whether `frame` is taking a truth value for a jump (if, while, and,
    or, not, assert, a ternary) rather than calling bool() itself."""
    for ins in dis.get_instructions(frame.f_code):
        if ins.offset == frame.f_lasti:
            return "JUMP" in ins.opname or ins.opname in ("UNARY_NOT", "TO_BOOL")
    return False


def _tagging(name, orig):
    def read(self, *args, **kwargs):
        try:
            return orig(self, *args, **kwargs)
        except Exception as e:
            # Only the frame now knows where: note it for `translated`.
            caller = sys._getframe(1)
            f = _user_frame(caller)
            # Nested reads (a torch-function mode calls the method again)
            # unwind inner first: the outermost, nearest the user, wins.
            if f is not None:
                direct = f is caller
                how = _READS[name][0] if direct else \
                    f"reads a tensor's value into Python ({_READS[name][1]})"
                setattr(e, _TAG, dict(how=how, file=f.f_code.co_filename, line=f.f_lineno,
                                      branch=direct and name == "__bool__" and _deciding(f)))
            raise
    return read


@contextlib.contextmanager
def _reads_tagged():
    saved = {n: torch.Tensor.__dict__.get(n) for n in _READS}
    for n in _READS:
        setattr(torch.Tensor, n, _tagging(n, getattr(torch.Tensor, n)))
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is None:
                delattr(torch.Tensor, n)  # back to the inherited C method
            else:
                setattr(torch.Tensor, n, v)


def _chain(e):
    seen = set()
    while e is not None and id(e) not in seen:
        yield e
        seen.add(id(e))
        e = e.__cause__ or e.__context__


def _op_read(e):
    """The tag for a read inside a torch op (torch.equal), which no Tensor
    method sees: torch's own error, worded so on both versions, raised
    under the user's innermost frame."""
    if not any("value out of a tracing tensor" in str(x) for x in _chain(e)):
        return None
    tbs = []
    for x in _chain(e):
        tb = x.__traceback__
        while tb is not None:
            tbs.append(tb)
            tb = tb.tb_next
    tb = next((t for t in reversed(tbs) if _user_frame(t.tb_frame) is t.tb_frame), None)
    if tb is None:
        return None
    return dict(how="reads a tensor's value into Python (in a torch op)",
                file=tb.tb_frame.f_code.co_filename, line=tb.tb_lineno, branch=False)


def _read_error(e):
    """The DataDependentError that explains `e`, or None."""
    tag = next((getattr(x, _TAG) for x in _chain(e) if hasattr(x, _TAG)), None) or _op_read(e)
    if tag is None:
        return None
    code = _quoted(tag["file"], tag["line"])
    if tag["branch"]:
        msg = (f"data-dependent control flow: {code} branches on a tensor's value, but the "
               "captured step is one fixed graph (it would always take the example batch's "
               "branch); compute both sides and pick with torch.where(cond, a, b), or move "
               "the decision out of the step")
    else:
        msg = (f"tensor value read in the step: {code} {tag['how']}, making a Python value that "
               "the captured graph would freeze at the example batch's; keep it a tensor "
               "(x * t, not x * t.item(); torch.where for choices), or compute it outside "
               "the step")
    return DataDependentError(msg, f"{tag['file']}:{tag['line']}")


def translated(trace):
    """Decorates trace.trace: torch's errors for reads of tensor values
    become DataDependentError; any other error passes unchanged."""
    @functools.wraps(trace)
    def traced(*args, **kwargs):
        try:
            with _reads_tagged():
                return trace(*args, **kwargs)
        except CaptureError:
            raise
        except Exception as e:
            err = _read_error(e)
            if err is None:
                raise
            raise err from e
    return traced
