"""Decompositions of indexing ops (part of decompositions.py's table):
advanced-index reads and writes as index_select / index_put over merged
dims, boolean masks as where, and the scatters functionalize emits."""
import torch


def _trimmed(indices):
    """indices without trailing Nones (full slices, as if not written)."""
    indices = list(indices)
    while indices and indices[-1] is None:
        indices.pop()
    return indices


def _is_mask(t):
    return t.dtype in (torch.bool, torch.uint8)


def _index(x, indices):
    """x[..., idx_0, idx_1, ...] for integer index tensors (None: a full
    slice), as one index_select of the merged dims by the linearised index.
    Index tensors on adjacent dims keep their place; separated by a slice,
    torch puts the broadcast index dims first, so the indexed dims of x move
    to the front and it is the adjacent case. A mask index stays aten.index
    (data-dependent: the capture refuses it)."""
    indices = _trimmed(indices)
    first = next((i for i, t in enumerate(indices) if t is not None), None)
    tensors = [t for t in indices if t is not None]
    count = len(tensors)
    if first is None or any(_is_mask(t) for t in tensors):
        return NotImplemented
    if any(t is None for t in indices[first:]):
        dims = [d for d, t in enumerate(indices) if t is not None]
        return _index(x.movedim(dims, list(range(count))), tensors)
    idx = torch.broadcast_tensors(*tensors) if count > 1 else tensors
    dims = x.shape[first:first + count]
    flat = torch.zeros_like(idx[0])
    for t, d in zip(idx, dims):
        flat = flat * d + torch.where(t < 0, t + d, t)
    merged = x.reshape(*x.shape[:first], -1, *x.shape[first + count:]) if count > 1 else x
    out = merged.index_select(first, flat.reshape(-1))
    return out.reshape(*x.shape[:first], *idx[0].shape, *x.shape[first + count:])


def _index_put(x, indices, values, accumulate=False):
    """x[..., idx_0, idx_1, ...] = values (+= with accumulate), values cast
    to x's dtype and broadcast to what x[indices] would be.
    - Integer index tensors on adjacent dims: the runtime's index_put on dim
      0 of x with the indexed dims merged and moved first, at the linearised
      index. One 1-d index on dim 0 with values of that shape is the
      runtime's own op.
    - Separated by a slice: x[indices] has the index dims first, so x's
      indexed dims move to the front, the adjacent case writes, and they
      move back.
    - One bool/uint8 mask (after full slices) with values that do not depend
      on how many elements it selects: a where() over all of x.
    Anything else (a mask with other indices, values sized by the mask's
    count) stays whole: data-dependent, and the runtime's index_put takes
    int64 indices only."""
    trimmed = _trimmed(indices)
    first = next((i for i, t in enumerate(trimmed) if t is not None), None)
    if first is None:
        return NotImplemented
    if len(trimmed) < len(indices):  # so that an op kept whole has no trailing None
        out = _index_put(x, trimmed, values, accumulate)
        return torch.ops.aten.index_put.default(x, trimmed, values, accumulate) \
            if out is NotImplemented else out
    tensors = [t for t in indices if t is not None]
    count = len(tensors)
    if any(_is_mask(t) for t in tensors):
        return _mask_put(x, first, tensors[0], values, accumulate) \
            if count == 1 else NotImplemented
    if any(t is None for t in indices[first:]):  # apart: torch puts their dims first
        dims = [d for d, t in enumerate(indices) if t is not None]
        front = list(range(count))
        moved = x.movedim(dims, front)
        shape = torch.broadcast_shapes(*[t.shape for t in tensors])
        vals = values.expand(*shape, *moved.shape[count:])
        return _index_put(moved, tensors, vals, accumulate).movedim(front, dims)
    idx = torch.broadcast_tensors(*tensors) if count > 1 else tensors
    lead, rest = list(x.shape[:first]), list(x.shape[first + count:])
    if count == 1 and first == 0 and idx[0].dim() == 1 \
            and list(values.shape) == list(idx[0].shape) + rest:
        return NotImplemented
    flat = torch.zeros_like(idx[0])
    for t, d in zip(idx, x.shape[first:first + count]):
        flat = flat * d + torch.where(t < 0, t + d, t)
    flat = flat.reshape(-1)
    merged = x.reshape(*lead, -1, *rest).movedim(first, 0)
    vals = values.to(x.dtype).expand(*lead, *idx[0].shape, *rest)
    vals = vals.reshape(*lead, flat.numel(), *rest).movedim(first, 0)
    out = torch.ops.aten.index_put.default(merged, [flat], vals.contiguous(), accumulate)
    return out.movedim(0, first).reshape(x.shape)


def _mask_put(x, first, mask, values, accumulate):
    """x[:, ..., mask] = values with `first` full slices before the mask.
    x[mask] has shape lead + [count of True] + rest; values of a static
    shape have size 1 on the count's dim (right-aligned), so they broadcast
    over lead + mask's dims + rest."""
    lead, m = x.shape[:first], mask.dim()
    rest = x.shape[first + m:]
    if list(mask.shape) != list(x.shape[first:first + m]):
        return NotImplemented  # eager raises its own error
    if values.numel() == 1:
        vals = values.reshape(())
    else:
        shape = [1] * (len(lead) + 1 + len(rest) - values.dim()) + list(values.shape)
        if len(shape) != len(lead) + 1 + len(rest) or shape[len(lead)] != 1:
            return NotImplemented  # sized by the mask's count
        vals = values.reshape(*shape[:len(lead)], *[1] * m, *shape[len(lead) + 1:])
    vals = vals.to(x.dtype).expand(x.shape)
    keep = mask.bool().reshape(*mask.shape, *[1] * len(rest))
    if accumulate:
        return x + torch.where(keep, vals, torch.zeros_like(x))
    return torch.where(keep, vals, x)


def _as_strided_scatter(x, src, size, stride, storage_offset=None):
    """x with its as_strided(size, stride, offset) view replaced by src, as an
    index_put into the flattened x (functionalize's form of writing into a
    view); for a contiguous x, whose storage is its own order."""
    if not x.is_contiguous() or x.storage_offset() != 0:
        return NotImplemented
    ids = torch.arange(x.numel())
    pos = ids.as_strided(size, stride, storage_offset or 0).clone().reshape(-1)
    out = x.reshape(-1).index_put([pos], src.to(x.dtype).reshape(-1))
    return out.reshape(x.shape)


def _select_scatter(x, src, dim, index):
    """x with x.select(dim, index) replaced by src: select's backward (1.13
    leaves it whole), as slice_scatter of src with dim put back."""
    dim = dim % x.dim()
    index = index % x.shape[dim]
    return torch.ops.aten.slice_scatter.default(x, src.unsqueeze(dim), dim, index, index + 1, 1)


def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """aten.embedding as one index_select on the flattened indices (2.x's
    own decomposition indexes weight[indices], aten.index, for 2-d ones)."""
    rows = weight.index_select(0, indices.reshape(-1))
    return rows.view(*indices.shape, weight.shape[1])
