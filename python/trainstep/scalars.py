"""Python numbers that change from step to step, kept traced.

An optimizer's step() computes with Python floats: `-group["lr"]`,
`1 - beta1 ** state["step"]`, `math.sqrt(bias_correction2)`. The LR is a
runtime input and a step count is state, so while step() is traced both
are a `Scalar`: a float whose arithmetic builds float64 graph nodes (Python
floats are doubles: the same IEEE operations as eager), and which a
torch-function mode (`ScalarMode`) turns into a 0-d tensor wherever torch
takes a number.

A Scalar's own float value is NaN: code that reads it as a plain float
anyway (a C function reading the double directly, `from math import sqrt`
bound before the patch) poisons the step instead of freezing the example's
value, and `leaked_nan` names the node. Comparisons and conversions to
int/bool, which would decide Python control flow, fail in one line naming
the user's source line.
"""
import math
import operator
import sys

import torch
from torch.overrides import TorchFunctionMode

from . import capture_errors, environment
from .errors import CaptureError


def _where():
    """(file, line) of the innermost user frame (the optimizer's code),
    past this module's own frames."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    f = capture_errors._user_frame(f)
    return (f.f_code.co_filename, f.f_lineno) if f is not None else (None, None)


def refuse(what):
    file, line = _where()
    code = capture_errors._quoted(file, line)
    raise CaptureError(
        f"the optimizer's step() {what} at {code}; that number is the learning rate or a "
        "value that changes every step (a step count), which the captured step keeps as a "
        "tensor, so it cannot steer Python control flow or become a plain number. Compute "
        "with it arithmetically (torch.where for a choice), or keep it a constant",
        f"{file}:{line}" if file else None)


def _operand(x):
    if isinstance(x, Scalar):
        return x.t
    if isinstance(x, (int, float)):
        return x
    return None


def _binary(op, reflected=False):
    def f(self, other):
        o = _operand(other)
        if o is None:
            return NotImplemented  # a tensor: its reflected method, through ScalarMode
        return Scalar(op(o, self.t) if reflected else op(self.t, o))
    return f


def _refusing(what):
    def f(self, *args):
        refuse(what)
    return f


class Scalar(float):
    """A Python number whose value is the 0-d float64 graph value `t`."""

    def __new__(cls, t):
        s = float.__new__(cls, math.nan)
        s.t = t if t.dtype == torch.float64 else t.to(torch.float64)
        return s

    __add__, __radd__ = _binary(operator.add), _binary(operator.add, True)
    __sub__, __rsub__ = _binary(operator.sub), _binary(operator.sub, True)
    __mul__, __rmul__ = _binary(operator.mul), _binary(operator.mul, True)
    __truediv__, __rtruediv__ = _binary(operator.truediv), _binary(operator.truediv, True)
    __pow__, __rpow__ = _binary(operator.pow), _binary(operator.pow, True)

    def __neg__(self):
        return Scalar(-self.t)

    def __pos__(self):
        return self

    def __abs__(self):
        return Scalar(self.t.abs())

    __lt__ = __le__ = __gt__ = __ge__ = _refusing("compares such a number")
    __eq__ = __ne__ = _refusing("compares such a number")
    __bool__ = _refusing("takes the truth value of such a number")
    __int__ = __index__ = __trunc__ = __floor__ = __ceil__ = __round__ = \
        _refusing("turns such a number into an int")
    __float__ = _refusing("calls float() on such a number")
    __mod__ = __rmod__ = __floordiv__ = __rfloordiv__ = __divmod__ = \
        _refusing("takes a remainder or floor of such a number")
    __hash__ = float.__hash__

    def __repr__(self):
        return "Scalar(traced)"

    def __reduce__(self):  # deepcopy of a param group during tracing
        return (Scalar, (self.t,))


def _lift(name, *args):
    """math.<name>(*args) for a Scalar argument, else NotImplemented."""
    if not any(isinstance(a, Scalar) for a in args):
        return NotImplemented
    ts = [a.t if isinstance(a, Scalar) else torch.tensor(float(a), dtype=torch.float64)
          for a in args]
    if name == "pow":
        return Scalar(torch.pow(ts[0], ts[1]))
    if name == "fabs":
        return Scalar(ts[0].abs())
    return Scalar(getattr(torch, name)(ts[0]))


def _tensor(x, like):
    """x (a Scalar or 0-d tensor standing for a number) as a 0-d tensor of
    `like`'s floating dtype, as torch casts a Python number to the op's."""
    t = x.t if isinstance(x, Scalar) else x
    dtype = like.dtype if isinstance(like, torch.Tensor) and like.is_floating_point() \
        else torch.float64
    return t.to(dtype)


def _first_tensor(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            return a[0]
    return None


def _numberish(x):
    return isinstance(x, Scalar) or (isinstance(x, torch.Tensor) and x.dim() == 0)


def _scaled(other, s, like):
    """other * s, for alpha= and value= arguments (lists: each element)."""
    if isinstance(other, (list, tuple)):
        return [o * _tensor(s, o) for o in other]
    return other * _tensor(s, like if like is not None else other)


def _full(name, args, kwargs):
    """torch.full / full_like / Tensor.new_full with a Scalar fill (their
    fill_value must be a plain number): zeros of that shape plus the value."""
    args = list(args)
    at = 2 if name == "new_full" else 1
    fill = args.pop(at) if len(args) > at else kwargs.pop("fill_value")
    if name == "full":
        z = torch.zeros(*args, **kwargs)
    elif name == "full_like":
        z = torch.zeros_like(*args, **kwargs)
    else:
        z = args[0].new_zeros(*args[1:], **kwargs)
    return (z + _tensor(fill, z)).to(z.dtype)


class ScalarMode(TorchFunctionMode):
    """Wherever a torch function gets a Scalar, it gets the 0-d tensor
    instead; alpha= and value= (add, sub, addcmul, addcdiv), which take no
    tensor, become a multiplication first; full() with a Scalar fill is
    zeros plus the value."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        flat = list(args) + list(kwargs.values())
        if not any(isinstance(a, Scalar) or (isinstance(a, (list, tuple))
                   and any(isinstance(e, Scalar) for e in a)) for a in flat) \
                and not any(_numberish(kwargs.get(k)) for k in ("alpha", "value")):
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        like = _first_tensor(args)
        args = list(args)
        if _numberish(kwargs.get("alpha")) and len(args) >= 2:
            args[1] = _scaled(args[1], kwargs.pop("alpha"), like)
        if _numberish(kwargs.get("value")) and name.startswith(("addcmul", "addcdiv")) \
                and len(args) >= 3:
            v = kwargs.pop("value")
            t1, t2 = args[1], args[2]
            term = _scaled(t1, v, like) * t2 if name.startswith("addcmul") \
                else _scaled(t1, v, like) / t2
            return args[0].add_(term) if name.endswith("_") else torch.add(args[0], term)

        if name in ("full", "full_like", "new_full"):
            return _full(name, args, kwargs)

        def conv(a):
            if isinstance(a, Scalar):
                return _tensor(a, like)
            if isinstance(a, (list, tuple)) and any(isinstance(e, Scalar) for e in a):
                return type(a)(_tensor(e, like) if isinstance(e, Scalar) else e for e in a)
            return a
        args = [conv(a) for a in args]
        kwargs = {k: conv(v) for k, v in kwargs.items()}
        try:
            return func(*args, **kwargs)
        except (TypeError, RuntimeError) as e:
            refuse(f"passes such a number to {name or func} ({str(e).splitlines()[0]})")


def environment_patches(p=None):
    """The patches under which step() is traced (added to `p`): math on
    Scalars, and the 'compiling' flag torch.optim reads."""
    p = p if p is not None else environment.Patches()
    environment.math_functions(p, _lift)
    environment.compiling_flag(p)
    return p


def leaked_nan(gm):
    """A node outside the model's modules (the optimizer's are) with a NaN
    number among its arguments: a Scalar read as a plain float somewhere
    ScalarMode could not see. A model's own NaN literal is left alone."""
    from . import provenance
    for n in gm.graph.nodes:
        if n.op != "call_function" or "module" in provenance.of_node(n):
            continue
        for a in list(n.args) + list(n.kwargs.values()):
            if isinstance(a, float) and math.isnan(a):
                return n
    return None
