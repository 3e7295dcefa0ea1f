"""The few torch APIs whose home moved between 1.13 and 2.x."""
import contextlib

import torch

try:  # torch >= 2.0
    from torch.func import functional_call, grad_and_value, functionalize, vmap
except ImportError:  # torch 1.13: functorch and nn.utils.stateless
    from functorch import grad_and_value, functionalize, vmap
    from torch.nn.utils.stateless import functional_call

from torch.fx.experimental.proxy_tensor import make_fx


# Ops the runtime runs as one kernel although torch._decomp has a
# decomposition:
# - softmax, log_softmax, layer-norm backward: torch._decomp's versions make
#   many passes over memory;
# - aten._to_copy: 1.13's decomposition (to prims.convert_element_type)
#   fails under vmap on `0-d tensor * float`, which per-sample eval losses
#   such as `0.9 * loss` hit;
# - batch norm: one kernel each way instead of ~10 reductions and pointwise
#   passes (the exporter's F.batch_norm stand-in, patches.py, keeps the op
#   functional).
KEEP = {"aten.native_layer_norm_backward.default",
        "aten._softmax.default", "aten._softmax_backward_data.default",
        "aten._log_softmax.default", "aten._log_softmax_backward_data.default",
        "aten._to_copy.default",
        "aten.native_batch_norm.default", "aten.native_batch_norm_backward.default"}
# - padding and upsampling: one gather (scatter-add backward) kernel each,
#   where 2.x's decompositions index with broadcast index tensors and 1.13
#   keeps some whole; keeping them makes both torches emit the same ops.
KEEP |= {f"aten.{op}.{o}" for op in
         ("reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
          "reflection_pad1d_backward", "reflection_pad2d_backward",
          "replication_pad1d_backward", "replication_pad2d_backward",
          "upsample_nearest2d", "upsample_nearest2d_backward",
          "upsample_bilinear2d", "upsample_bilinear2d_backward")
         for o in ("default", "vec")}
# - adaptive average pooling: one kernel each way; 1.13 decomposes sizes that
#   do not divide into aten.index with broadcast index tensors.
KEEP |= {"aten._adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d_backward.default"}


@contextlib.contextmanager
def mkldnn_off():
    """oneDNN off for ATen's own op choice (torch.backends.mkldnn.flags also
    sets TF32 flags, which warns on 2.x)."""
    was = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(was)


def decomposition_table():
    """ATen-level decompositions only: the 1.13 table also lowers to prims.*,
    which the runtime does not take, so keep entries defined in
    torch._decomp.decompositions (core_aten_decompositions on 2.x); ops in
    KEEP stay whole."""
    import torch._decomp as D
    if hasattr(D, "core_aten_decompositions"):
        table = dict(D.core_aten_decompositions())
    else:
        table = {k: v for k, v in D.decomposition_table.items()
                 if getattr(v, "__module__", "") == "torch._decomp.decompositions"}
    table = {k: v for k, v in table.items() if str(k) not in KEEP}
    # Ops the runtime cannot run whole whose torch decomposition 2.x keeps
    # out of the core table (1.13's table has them).
    for op in (torch.ops.aten.native_group_norm.default,):
        if op in D.decomposition_table:
            table.setdefault(op, D.decomposition_table[op])
    table[torch.ops.aten.embedding.default] = _embedding
    table[torch.ops.aten.baddbmm.default] = _baddbmm
    # Ops the runtime cannot run whole that one torch's table leaves whole
    # (1.13: pixel_shuffle and most activations; 2.x: elu, leaky_relu,
    # hardtanh). Their backward ops (elu_backward, ...) are in both tables.
    for op, fn in _fallbacks().items():
        table.setdefault(op, fn)
    # 1.13's elu_backward gives result * scale, not grad * scale, where an
    # in-place ELU (is_result) is positive.
    table[torch.ops.aten.elu_backward.default] = _elu_backward
    # 2.x's roll indexes by (arange + shift) fmod n; ours is two slices and
    # a cat per dim.
    table[torch.ops.aten.roll.default] = _roll
    return table


def _fallbacks():
    A = torch.ops.aten
    ours = {A.pixel_shuffle.default: _pixel_shuffle, A.pixel_unshuffle.default: _pixel_unshuffle,
            A.elu.default: _elu, A.celu.default: _celu, A.leaky_relu.default: _leaky_relu,
            A.hardtanh.default: _hardtanh, A.softplus.default: _softplus, A.mish.default: _mish,
            A.sgn.default: _sgn, A.select_scatter.default: _select_scatter,
            A.ones.default: _ones, A.triu.default: _triu, A.tril.default: _tril,
            A.fill.Tensor: _fill_tensor, A.zero.default: _zero, A.new_empty.default: _new_empty,
            A.index.Tensor: _index, A.index_put.default: _index_put,
            A.as_strided_scatter.default: _as_strided_scatter,
            A.var_mean.correction: _var_mean,
            A.var.correction: _var, A.pow.Scalar: _pow_scalar}
    if hasattr(A, "prelu_backward"):  # 1.13's prelu backward op; 2.x decomposes prelu itself
        ours[A.prelu.default] = _prelu
        ours[A.prelu_backward.default] = _prelu_backward
    return ours


# Decompositions into ops the runtime has, each checked against torch's own
# op in tests/python/test_real_models.py.
def _leaky_relu(x, negative_slope=0.01):
    return torch.where(x > 0, x, x * negative_slope)


def _hardtanh(x, min_val=-1.0, max_val=1.0):
    return torch.clamp(x, min_val, max_val)


def _softplus(x, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above threshold as torch."""
    bx = x * beta
    return torch.where(bx > threshold, x, torch.log1p(torch.exp(bx)) / beta)


def _mish(x):
    return x * torch.tanh(_softplus(x))


def _celu(x, alpha=1.0):
    return _elu(x, alpha, 1.0, 1.0 / alpha)


def _prelu_weight(x, weight):
    """PReLU's weight (one value, or one per channel: dim 1) broadcast to x."""
    if weight.numel() == 1 or x.dim() < 2:
        return weight.reshape(())
    return weight.reshape(-1, *[1] * (x.dim() - 2))


def _prelu(x, weight):
    return torch.where(x > 0, x, x * _prelu_weight(x, weight))


def _prelu_backward(grad, x, weight):
    w = _prelu_weight(x, weight)
    gx = torch.where(x > 0, grad, grad * w)
    gw = torch.where(x > 0, grad * 0, grad * x)
    if weight.numel() == 1 or x.dim() < 2:
        gw = gw.sum().reshape(weight.shape)
    else:
        gw = gw.sum(dim=[d for d in range(x.dim()) if d != 1]).reshape(weight.shape)
    return gx, gw


def _pow_scalar(base, exponent):
    """number ** tensor (an optimizer's beta ** step): the number as a 0-d
    tensor of the result's dtype, so the runtime's pow.Tensor_Tensor
    computes the same std::pow."""
    dtype = exponent.dtype if exponent.is_floating_point() else torch.get_default_dtype()
    return torch.pow(torch.full([], base, dtype=dtype), exponent)


def _ones(size, dtype=None, layout=None, device=None, pin_memory=None):
    return torch.full(size, 1, dtype=dtype or torch.get_default_dtype())


def _zero(x):
    return torch.zeros_like(x)


def _new_empty(x, size, dtype=None, layout=None, device=None, pin_memory=None):
    """Zeros: the runtime has no uninitialised memory to hand out."""
    return x.new_zeros(size, dtype=dtype or x.dtype)


def _roll(x, shifts, dims=()):
    """torch.roll as slices and a cat per dim (Swin's shifted windows)."""
    if not dims:
        return _roll(x.reshape(-1), shifts, [0]).reshape(x.shape)
    for shift, dim in zip(shifts, dims):
        n = x.shape[dim]
        k = shift % n if n else 0
        if k:
            x = torch.cat([x.narrow(dim, n - k, k), x.narrow(dim, 0, n - k)], dim)
    return x


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


def _fill_tensor(x, value):
    """x's shape filled with the 0-d value (`t[s] = number` on 1.13)."""
    return value.to(x.dtype).expand(x.shape).clone()


def _band(x, diagonal, upper):
    """x where column - row >= diagonal (triu) or <= diagonal (tril), else 0."""
    rows = torch.arange(x.shape[-2]).unsqueeze(1)
    cols = torch.arange(x.shape[-1])
    keep = (cols - rows >= diagonal) if upper else (cols - rows <= diagonal)
    return torch.where(keep, x, torch.zeros_like(x))


def _triu(x, diagonal=0):
    """A causal mask's op (torch.ones(T, T).triu(1))."""
    return _band(x, diagonal, True)


def _tril(x, diagonal=0):
    return _band(x, diagonal, False)


def _select_scatter(x, src, dim, index):
    """x with x.select(dim, index) replaced by src: select's backward (1.13
    leaves it whole), as slice_scatter of src with dim put back."""
    dim = dim % x.dim()
    index = index % x.shape[dim]
    return torch.ops.aten.slice_scatter.default(x, src.unsqueeze(dim), dim, index, index + 1, 1)


def _var(x, dim=None, correction=None, keepdim=False):
    """sum((x - mean)^2) / (N - correction) over dim (None: all), as two
    passes (2.x's own decomposition lowers to prims.var)."""
    return _var_mean(x, dim, correction=correction, keepdim=keepdim)[0]


def _var_mean(x, dim=None, correction=None, keepdim=False):
    dims = list(range(x.dim())) if dim is None or len(dim) == 0 else list(dim)
    n = 1
    for d in dims:
        n *= x.shape[d]
    mean = x.mean(dim=dims, keepdim=True)
    c = 1 if correction is None else correction
    var = ((x - mean) ** 2).sum(dim=dims, keepdim=keepdim) / max(n - c, 0)
    return var, (mean if keepdim else mean.reshape(var.shape))


def _sgn(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    """scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))."""
    neg = torch.expm1(x * input_scale) * (alpha * scale)
    return torch.where(x > 0, x * scale, neg)


def _elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result):
    """elu's gradient, from its input or (is_result, in-place ELU) its output."""
    if is_result:
        neg = grad * input_scale * (self_or_result + alpha * scale)
    else:
        neg = grad * (input_scale * alpha * scale) * torch.exp(self_or_result * input_scale)
    return torch.where(self_or_result > 0, grad * scale, neg)


def _pixel_shuffle(x, r):
    """[*, C*r*r, H, W] -> [*, C, H*r, W*r] as a reshape, a permute and a
    reshape (its backward, pixel_unshuffle, decomposes the same way)."""
    *lead, c, h, w = x.shape
    n = len(lead)
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    y = y.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return y.reshape(*lead, c // (r * r), h * r, w * r)


def _pixel_unshuffle(x, r):
    """[*, C, H*r, W*r] -> [*, C*r*r, H, W], pixel_shuffle's inverse."""
    *lead, c, hr, wr = x.shape
    n = len(lead)
    y = x.reshape(*lead, c, hr // r, r, wr // r, r)
    y = y.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return y.reshape(*lead, c * r * r, hr // r, wr // r)


def _baddbmm(input, batch1, batch2, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2) (1.13's MultiheadAttention
    with a mask; its table has no entry the runtime can take)."""
    prod = torch.bmm(batch1, batch2)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return prod
    return prod + (input if beta == 1 else input * beta)


def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """aten.embedding as one index_select on the flattened indices (2.x's
    own decomposition indexes weight[indices], aten.index, for 2-d ones)."""
    rows = weight.index_select(0, indices.reshape(-1))
    return rows.view(*indices.shape, weight.shape[1])


__all__ = ["functional_call", "grad_and_value", "functionalize", "vmap", "make_fx",
           "decomposition_table", "mkldnn_off", "torch"]
