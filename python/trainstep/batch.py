"""Where the batch is: the dim of each example input tensor and of each
target tensor (each tensor leaf of a structured input or target,
pytree.Example) that holds the batch's samples.

Dim 0 unless the spec says otherwise (TrainSpec.batch_dims and
target_batch_dim) or the example batch shows it: sequence-first data, a
(seq, batch) LM batch or a batch_first=False RNN's (seq, batch, feature)
input, holds the batch on dim 1. A target flattened over (seq, batch)
(word_language_model's `target.view(-1)`) is unflattened to (seq, batch)
for the runtime and flattened back for the loss (pytree.Example). The
golden steps permute samples along
these dims, the eval step's per-sample loss maps them (and the matching dim
of each output), and the runtime's data path lays batches out by them.
"""
from dataclasses import dataclass
from typing import List

import torch

from . import pytree
from .errors import BatchLayoutError, CaptureError

# Inferred batch dims are looked for among these (a batch deeper than dim
# 1 is declared).
_CANDIDATES = (0, 1)


@dataclass
class Layout:
    inputs: List[int]   # batch dim of each example input leaf
    targets: List[int]  # batch dim of each example target leaf
    size: int           # samples per batch
    flat: bool = False  # a target was flattened over (seq, batch)

    @property
    def trivial(self):
        return all(d == 0 for d in self.inputs + self.targets)


def example(spec, where=None):
    """The spec's example batch as pytree.Example; a BatchLayoutError when an
    input or the target holds what the step cannot take, or the target no
    tensor."""
    try:
        names = pytree.forward_arg_names(spec.model) if getattr(spec, "model", None) else None
        ex = pytree.Example(spec.example_inputs, spec.example_target, names)
    except TypeError as e:
        raise BatchLayoutError(f"the example batch: {e}", where) from None
    if not ex.target_leaves:
        raise BatchLayoutError(
            "the example target holds no tensor; the step takes at least one target tensor "
            "(a tensor, or a dict, tuple, ... of them)", where)
    _unflatten(ex, spec, where)
    return ex


def _unflatten(ex, spec, where):
    """Unflattens each target leaf flattened over an input's first two dims:
    its dim 0 holds (seq * batch) of an input leaf's (seq, batch) (or
    (batch, seq)). A target whose batch dim is declared is taken as it is."""
    declared = _per_leaf(getattr(spec, "target_batch_dim", None), len(ex.target_leaves),
                         "target_batch_dim", "target tensor", where)
    pairs = [tuple(x.shape[:2]) for x in ex.input_leaves
             if isinstance(x, torch.Tensor) and x.dim() >= 2 and min(x.shape[:2]) > 1]
    for i, t in enumerate(ex.target_leaves):
        if declared[i] is not None or not isinstance(t, torch.Tensor) or t.dim() == 0:
            continue
        if any(t.shape[0] == s for x in ex.input_leaves if isinstance(x, torch.Tensor)
               for s in x.shape[:2]):
            continue  # the batch is on one of its dims already
        found = [p for p in pairs if p[0] * p[1] == t.shape[0]]
        if found:
            ex.unflatten_target(i, found[0])


def _shapes(named):
    return ", ".join(f"{w} {list(t.shape)}" for w, t in named)


def resolve(spec, where=None):
    """The spec's Layout; a BatchLayoutError (with `where`) when the batch
    cannot be placed."""
    ex = example(spec, where)
    lay = _resolve(spec, ex, where)
    lay.flat = any(ex.flat)
    declared = getattr(spec, "batch_dims", None) is not None
    if lay.flat and not declared and len({t.shape[0] for _, t in ex.described()}) == 1:
        # (seq, batch) or (batch, seq): every dim 0 agrees, so nothing tells.
        i = ex.flat.index(True)
        shape = list(ex.target_leaves[i].shape)
        raise BatchLayoutError(
            f"the example target (flattened to {[shape[0] * shape[1]] + shape[2:]}) is the "
            f"example batch's first two dims {shape[:2]} flattened, as a language model's "
            "training loop flattens it, and which of the two holds the batch cannot be told "
            "from the example: declare it, TrainSpec(batch_dims=1) for (seq, batch) data or "
            "batch_dims=0 for (batch, seq)", where)
    return lay


def _resolve(spec, ex, where):
    named = ex.described()  # each input tensor, then each target tensor
    n_in = len(ex.input_leaves)
    if any(not isinstance(t, torch.Tensor) or t.dim() == 0 for _, t in named):
        # Not a batch the capture takes; check_spec and the capture say so.
        return Layout([0] * n_in, [0] * (len(named) - n_in), 0)
    declared = getattr(spec, "batch_dims", None)
    if declared is not None or getattr(spec, "target_batch_dim", None) is not None:
        return _declared(spec, named, n_in, where)
    target = named[n_in][1]  # the first target tensor sets the candidate sizes
    if len({t.shape[0] for _, t in named}) == 1:
        return Layout([0] * n_in, [0] * (len(named) - n_in), int(target.shape[0]))
    found = []
    for size in {int(target.shape[d]) for d in _CANDIDATES if d < target.dim()}:
        dims = []
        for _, t in named:
            at = [d for d in _CANDIDATES if d < t.dim() and t.shape[d] == size]
            dims.append(at)
        if all(len(a) == 1 for a in dims):
            found.append(Layout([a[0] for a in dims[:n_in]], [a[0] for a in dims[n_in:]], size))
        elif all(dims):
            found.append(None)  # the size sits on dim 0 and dim 1 of some tensor
    if len(found) == 1 and found[0] is not None:
        return found[0]
    if found:
        why = "it is ambiguous (a size fits more than one dim)"
    else:
        why = "no size is on dim 0 or 1 of every one of them"
    raise BatchLayoutError(
        f"batch dimension: {_shapes(named)} do not agree on dim 0, and where else the batch "
        f"is cannot be inferred: {why}. Declare it: TrainSpec(batch_dims=(dim of each "
        f"input,), target_batch_dim=dim or (dim of each target tensor,))", where)


def _per_leaf(value, n, field, noun, where):
    """batch_dims / target_batch_dim as one dim per tensor leaf (an int
    stands for every leaf; None stays None)."""
    if value is None or isinstance(value, int):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise BatchLayoutError(f"{field} has {len(value)} entries for {n} example {noun}(s)",
                               where)
    return value


def _declared(spec, named, n_in, where):
    dims = _per_leaf(getattr(spec, "batch_dims", None), n_in, "batch_dims", "input", where)
    dims = [0 if d is None else d for d in dims]
    t_dims = _per_leaf(getattr(spec, "target_batch_dim", None), len(named) - n_in,
                       "target_batch_dim", "target tensor", where)
    first = named[0][1] if n_in else None
    size = int(first.shape[dims[0]]) if n_in and -first.dim() <= dims[0] < first.dim() else None
    for i, d in enumerate(t_dims):  # unset: the inputs' dim where it fits the target, else 0
        t = named[n_in + i][1]
        if d is None:
            fits = n_in and dims[0] < t.dim() and t.shape[dims[0]] == size
            t_dims[i] = dims[0] if fits else 0
    all_dims = dims + t_dims
    for (what, t), d in zip(named, all_dims):
        if not -t.dim() <= d < t.dim():
            raise BatchLayoutError(f"batch dimension {d} of {what} is out of range for its "
                                   f"shape {list(t.shape)}", where)
    all_dims = [d % t.dim() for (_, t), d in zip(named, all_dims)]
    target = named[n_in][1]
    size = int(target.shape[all_dims[n_in]])
    for (what, t), d in zip(named, all_dims):
        if t.shape[d] != size:
            raise BatchLayoutError(
                f"batch dimension: {what} has {t.shape[d]} samples on its batch dim {d} "
                f"(shape {list(t.shape)}) but {named[n_in][0]} has {size} on dim "
                f"{all_dims[n_in]} (shape {list(target.shape)})", where)
    return Layout(all_dims[:n_in], all_dims[n_in:], size)


def per_sample_dims(leaves, layout, names):
    """output_dims, or None where an output has no batch dim of its own (a
    loss the model returns, a 0-d tensor; an output flattened over (seq,
    batch) with its target): the eval step then gives the batch's loss
    instead of each sample's."""
    try:
        return output_dims(leaves, layout, names)
    except CaptureError as e:
        if layout.flat or any(leaf.dim() == 0 for leaf in leaves):
            return None
        raise e


def output_dims(leaves, layout, names):
    """The batch dim of each output tensor: the first input's batch dim
    where it has the batch size there, else its only dim of that size."""
    prefer = layout.inputs[0] if layout.inputs else 0
    out = []
    for leaf, name in zip(leaves, names):
        if leaf.dim() > prefer and leaf.shape[prefer] == layout.size:
            out.append(prefer)
            continue
        at = [d for d in range(leaf.dim()) if leaf.shape[d] == layout.size]
        if len(at) != 1:
            raise CaptureError(
                f"the model's output {name} (shape {list(leaf.shape)}) has "
                f"{'no' if not at else 'more than one'} dim of the batch size {layout.size} "
                f"apart from dim {prefer}, so the eval step cannot split it per sample")
        out.append(at[0])
    return out
