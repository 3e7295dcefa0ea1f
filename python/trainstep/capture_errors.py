"""What a captured step cannot do, said in one line: the cause, the user's
FILE:LINE that did it, and the way out (README, "Errors and exit codes").

make_fx traces the step with real tensors. What it cannot capture ends in a
RuntimeError deep inside torch, worded differently by 1.13 and 2.x, or in
nothing at all: a value silently baked into the graph. So each class is
caught where it happens, the same way on both:

- data-dependent control flow and value reads (`if x.sum() > 0`, .item(),
  .tolist(), float/int/bool(t)): while _trace runs, Tensor's reading
  methods tag the exception torch raises with the user's frame
  (`translated`); torch's "value out of a tracing tensor" is the fallback
  for reads inside torch ops (torch.equal).
- data-dependent shapes (nonzero, x[mask], unique): ops torch tags
  dynamic_output_shape, and index / index_put left with a boolean mask, in
  the raw graph (`check_graph`). A shape read from one is baked in with no
  error at all; a mask index_put would fail only when the runtime loads it.
- writes into the example batch: one eager forward per mode on copies,
  watching the batch's version counters (`check_spec`). In train mode
  functorch refuses them with a traceback; in eval mode 1.13 drops the write
  silently and 2.x leaves a copy_ in the graph.
- tensor subclasses among the parameters, buffers and example batch
  (`check_spec`); they fail later in deepcopy or dispatch.
"""
import contextlib
import copy
import dis
import functools
import linecache
import os
import re
import sys
import sysconfig

import torch

from . import batch, provenance, rng


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
    """Decorates capture's _trace: torch's errors for reads of tensor values
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


# --- data-dependent shapes ------------------------------------------------

# aten.index / index_put whose indices hold a bool or uint8 mask: x[mask]
# has one element per True. compat.py turns a mask write whose values
# broadcast into a where(); what is left is data-dependent, and the
# runtime's index ops take int64 indices only.
_MASK_OPS = {"aten.index": "reads", "aten.index_put": "writes", "aten.index_put_": "writes",
             "aten._index_put_impl": "writes", "aten._index_put_impl_": "writes"}

# What the user's line does, and the way out.
_MASK_SAYS = {
    "reads": ("reads x[mask] with a boolean mask",
              "read it as torch.where(mask, x, 0), and write x[mask] = v as "
              "torch.where(mask, v, x) or with a v that broadcasts (x[mask] = 0.0)"),
    "writes": ("writes x[mask] with a boolean mask together with other index tensors or "
               "values sized by its count of True",
               "write it as torch.where(mask, v, x), or with a v that broadcasts (x[mask] = 0.0)")}


def _mask_index(n):
    """"reads" or "writes" for an index / index_put node with a mask index,
    else None."""
    t = n.target
    if n.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
        return None
    how = _MASK_OPS.get(str(t.overloadpacket))
    if how is None or len(n.args) < 2 or not isinstance(n.args[1], (list, tuple)):
        return None
    idx = [i for i in n.args[1] if isinstance(i, torch.fx.Node)]
    dtypes = [getattr(i.meta.get("tensor_meta"), "dtype", None) for i in idx]
    return how if any(d in (torch.bool, torch.uint8) for d in dtypes) else None


def _dynamic_shape(n):
    """A node whose output size depends on its input's values."""
    t = n.target
    return n.op == "call_function" and isinstance(t, torch._ops.OpOverload) \
        and torch.Tag.dynamic_output_shape in t.tags and t is not torch.ops.aten.index.Tensor


def check_graph(gm):
    """Refuses data-dependent shapes in a freshly traced graph (before dead
    code goes: `x.nonzero().shape[0]` leaves only a dead nonzero node)."""
    for n in gm.graph.nodes:
        mask = _mask_index(n)
        if not mask and not _dynamic_shape(n):
            continue
        src = provenance.of_node(n)
        file, line = src.get("file"), src.get("line")
        op = str(n.target).replace(".default", "")
        where = f"{file}:{line}" if file else None
        if mask:
            what, fix = _MASK_SAYS[mask]
            raise DataDependentError(
                f"data-dependent shape: {_quoted(file, line)} {what} ({op}): x[mask] has one "
                "element per True, a size that depends on tensor values, but the captured "
                f"step has fixed shapes; {fix}", where)
        raise DataDependentError(
            f"data-dependent shape: {_quoted(file, line)} calls {op}, whose output size "
            "depends on tensor values, but the captured step has fixed shapes; use a "
            "fixed-size form (torch.where(mask, x, 0) instead of x[mask], mask.sum() "
            "instead of counting nonzero())", where)


# --- the spec's tensors: subclasses and writes into the batch -------------

def check_spec(spec, spec_path):
    """Refuses, before capture, what would otherwise fail deep in it:
    tensor subclasses and in-place writes into the example batch."""
    build_at = _build_line(spec_path) if spec_path else None
    batch.example(spec, build_at)
    _check_types(spec, build_at)
    _check_batch_dim(spec, build_at)
    _check_batch_writes(spec, build_at)


def _check_batch_dim(spec, build_at):
    """The batch's dim in every input and the target (batch.py) can be
    placed: a sequence-first batch would otherwise fail deep in the
    capture."""
    batch.resolve(spec, build_at)


def _build_line(spec_path):
    """'SPEC.py:LINE' of `def build(`, where the example batch is made."""
    with open(spec_path, encoding="utf-8", errors="replace") as f:
        for i, text in enumerate(f, 1):
            if text.startswith("def build("):
                return f"{spec_path}:{i}"
    return None


def _batch(spec):
    """(what, tensor) of each input leaf, then the target."""
    return batch.example(spec).described()


def _check_types(spec, build_at):
    from torch.nn.parameter import UninitializedTensorMixin
    model = spec.model
    named = [(f"parameter '{n}'", n, t) for n, t in model.named_parameters()]
    named += [(f"buffer '{n}'", n, t) for n, t in model.named_buffers()]
    named += [(what, None, t) for what, t in _batch(spec)]
    for what, name, t in named:
        if not isinstance(t, torch.Tensor) or type(t) in (torch.Tensor, torch.nn.Parameter):
            continue
        where = (_assigned_at(model, name) if name else None) or build_at
        if isinstance(t, UninitializedTensorMixin):
            raise TensorSubclassError(
                f"uninitialized lazy {what}: a lazy module's tensors get their shape on the "
                "first forward, and the capture needs it; run the model once in build() "
                "(model(*example_inputs)) before returning the TrainSpec", where)
        raise TensorSubclassError(
            f"unsupported tensor subclass: {what} is a {type(t).__name__}, and the capture "
            "traces plain torch.Tensor and nn.Parameter only; convert it with "
            "t.as_subclass(torch.Tensor) (a parameter: nn.Parameter(t.as_subclass(torch.Tensor)))",
            where)


def _assigned_at(model, name):
    """'FILE:LINE' in user code that assigns the parameter or buffer `name`
    ("fc.weight"): `self.fc.weight =` or register_*("weight", in the
    __init__ of its module or of a module above it; None if not found."""
    parts = name.split(".")
    for k in range(len(parts) - 1, -1, -1):
        try:
            mod = model.get_submodule(".".join(parts[:k]))
        except AttributeError:
            continue
        rel = ".".join(parts[k:])
        pats = [re.compile(rf"self\.{re.escape(rel)}\s*=[^=]")]
        if k == len(parts) - 1:
            pats.append(re.compile(rf"register_\w+\(\s*['\"]{re.escape(rel)}['\"]"))
        for cls in type(mod).__mro__:
            init = cls.__dict__.get("__init__")
            file = getattr(getattr(init, "__code__", None), "co_filename", "")
            if not file or not _is_user(file) or file.startswith(_OURS):
                continue
            first = init.__code__.co_firstlineno
            lines = linecache.getlines(file)
            end = max((ln for _, _, ln in init.__code__.co_lines() if ln), default=first)
            for i in range(first, min(end, len(lines)) + 1):
                if any(p.search(lines[i - 1]) for p in pats):
                    return f"{file}:{i}"
    return None


class _WriteWatch(torch.overrides.TorchFunctionMode):
    """Notes the user frame of the first torch call after which one of the
    watched tensors' version counter (shared with its views) moved."""

    def __init__(self, watched):
        super().__init__()
        self.watched = watched
        self.versions = [t._version for _, t in watched]
        self.found = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.found is None:
            for (what, t), v in zip(self.watched, self.versions):
                if t._version != v:
                    f = _user_frame(sys._getframe(1))
                    self.found = (what, f and f.f_code.co_filename, f and f.f_lineno)
                    break
        return out


def _forward(spec, training, watch=False):
    """Runs the model (and the loss, in training) eagerly on copies; returns
    the names of the batch tensors it wrote into, or with `watch` the first
    write as (name, file, line); None when none. Errors are left for the
    capture to report."""
    ex = batch.example(spec)
    copies = [(w, t.clone()) for w, t in ex.described()]
    n_in = len(ex.input_leaves)
    xs = ex.args([t for _, t in copies[:n_in]])
    target = ex.target([t for _, t in copies[n_in:]])
    before = [t._version for _, t in copies]
    mode = _WriteWatch(copies) if watch else contextlib.nullcontext()
    try:
        model = copy.deepcopy(spec.model)
        model.train(training)
        with rng.stream(torch.tensor(0), torch.tensor(0)), torch.set_grad_enabled(training), \
                mode:
            out = model(*xs)
            if training:
                spec.loss_fn(out, target)
    except Exception:
        pass
    if watch:
        return mode.found
    return [w for (w, t), v in zip(copies, before) if t._version != v] or None


def _check_batch_writes(spec, build_at):
    if not all(isinstance(t, torch.Tensor) for _, t in _batch(spec)):
        return  # not a batch the capture takes; it says so itself
    for training in (True, False):
        written = _forward(spec, training)
        if not written:
            continue
        what, file, line = _forward(spec, training, watch=True) or (written[0], None, None)
        when = "" if training else " in eval mode"
        raise InputWriteError(
            f"in-place write to the step's input: {_quoted(file, line)} modifies {what}"
            f"{when}, which the runtime passes in read-only; use the out-of-place op "
            "(x = x + 1, not x.add_(1) or x += 1), or clone first (x = x.clone())",
            f"{file}:{line}" if file else build_at)
