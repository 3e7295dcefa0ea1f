"""The tracing environment: symbols trainstep replaces while it traces, set
and restored by one context manager that refuses to patch a symbol twice
(two stand-ins for one symbol would make the result depend on their order).

- torch.compiler's "is compiling" flag (torch >= 2.1): torch.optim reads
  it to keep step counts as tensors (`_get_value`) and to allow its
  capturable path on the CPU, the path torch.compile traces. The eager
  golden run never sees it.
- math's functions, so that a Python number computed from the LR or a step
  count (traced_optim.Scalar) stays a traced value through math.sqrt & co.
- trainstep's own "tracing" flag, read by code that also runs eagerly and
  takes another form in the trace (rng.stream's attention: attention.py).
"""
import contextlib
import math
import sys

import torch


class Patches:
    """Replacements for attributes of modules or classes, applied together
    by `applied()` and restored in reverse order."""

    def __init__(self):
        self._items = []  # (owner, name, value)

    def add(self, owner, name, value):
        key = (id(owner), name)
        if any((id(o), n) == key for o, n, _ in self._items):
            raise ValueError(f"{getattr(owner, '__name__', owner)}.{name} is patched twice")
        self._items.append((owner, name, value))
        return self

    @contextlib.contextmanager
    def applied(self):
        saved = []
        try:
            for owner, name, value in self._items:
                # The owner's own attribute (a module's, a class's, an
                # object's), or none: restoring then deletes ours, and the
                # inherited one (a class's method) shows again.
                saved.append((owner, name, vars(owner).get(name, _ABSENT)))
                setattr(owner, name, value)
            yield
        finally:
            for owner, name, old in reversed(saved):
                if old is _ABSENT:
                    delattr(owner, name)
                else:
                    setattr(owner, name, old)


_ABSENT = object()


def compiling_flag(patches):
    """torch.compiler.is_compiling() answers True (where torch has the flag)."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "_is_compiling_flag"):
        patches.add(compiler, "_is_compiling_flag", True)
    return patches


# True while the capture traces (set by `tracing_flag`); read it as
# environment.tracing, at the time of the call.
tracing = False


def tracing_flag(patches):
    """environment.tracing reads True."""
    patches.add(sys.modules[__name__], "tracing", True)
    return patches


# math functions of one float argument that an optimizer's step() may apply
# to the LR or a step count.
MATH_UNARY = ("sqrt", "exp", "log", "log1p", "expm1", "cos", "sin", "tanh", "fabs")


def math_functions(patches, lift):
    """math.f(x) for a traced Scalar x is `lift(f, x)`; any other x goes to
    the real function."""
    for name in MATH_UNARY:
        real = getattr(math, name)

        def wrapped(x, _real=real, _name=name):
            out = lift(_name, x)
            return _real(x) if out is NotImplemented else out
        patches.add(math, name, wrapped)

    real_pow = math.pow

    def pow_(x, y):
        out = lift("pow", x, y)
        return real_pow(x, y) if out is NotImplemented else out
    patches.add(math, "pow", pow_)
    return patches
