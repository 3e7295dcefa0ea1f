"""Checks: what a captured step cannot do, refused in one line with the
cause, the user's FILE:LINE and the way out (docs/reliability.md,
"Errors"). Errors torch raises while tracing are capture_errors.py's.

- the spec's tensors, before capture (`check_spec`): tensor subclasses among
  the parameters, buffers and example batch, which fail later in deepcopy
  or dispatch; and writes into the example batch, found by one eager
  forward per mode on copies, watching the batch's version counters. In
  train mode functorch refuses them with a traceback; in eval mode 1.13
  drops the write silently and 2.x leaves a copy_ in the graph.
- data-dependent shapes (nonzero, x[mask], unique) in the raw traced graph
  (`check_graph`): ops torch tags dynamic_output_shape, and index /
  index_put left with a boolean mask. A shape read from one is baked in
  with no error at all; a mask index_put would fail only when the runtime
  loads it.
- the rewritten graph (`check_functional`): no op left that mutates.
- a traced optimizer (`check_traced_optimizer`): no learning rate or step
  count leaked as a plain float.
"""
import contextlib
import copy
import linecache
import re
import sys

import torch

from . import batch, provenance, rng, scalars
from .capture_errors import _OURS, _is_user, _quoted, _user_frame
from .errors import CaptureError, DataDependentError, InputWriteError, TensorSubclassError


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


# --- data-dependent shapes ------------------------------------------------

# aten.index / index_put whose indices hold a bool or uint8 mask: x[mask]
# has one element per True. decompositions.py turns a mask write whose values
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


# --- the rewritten graph: functional --------------------------------------

def mutating_nodes(gm):
    """Calls of ATen ops that write one of their arguments."""
    return [n for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
            and n.target._schema.is_mutable]


def check_functional(gm):
    """Refuses an in-place op the functionalize passes left (trace.py)."""
    for n in mutating_nodes(gm):
        raise CaptureError(f"in-place op {n.target} left in the graph after functionalize")


def check_traced_optimizer(parts, gm):
    """A traced step() that read the LR or a step count as a plain float
    left a NaN number in the graph (scalars.py)."""
    if not getattr(parts.opt, "traced", False):
        return
    n = scalars.leaked_nan(gm)
    if n is not None:
        raise CaptureError(
            f"optimizer {parts.opt.name} ({parts.opt.source}): its step() turned the learning "
            f"rate or a step count into a plain Python float where trainstep could not keep "
            f"it traced (node {n.name}, {n.target}), e.g. through a function imported by name "
            "(`from math import sqrt`); use math.sqrt(...) or torch ops on it")
