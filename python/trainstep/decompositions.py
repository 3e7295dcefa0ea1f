"""Decompositions: the ATen ops make_fx lowers while it traces, and into
what (the pipeline's third stage, after environment.py and trace.py; see
capture.py).

torch._decomp's table, less the ops the runtime runs whole (KEEP), plus
ours for ops one torch leaves whole or lowers into ops the runtime lacks.
"""
import torch

from .index_decompositions import (_as_strided_scatter, _embedding, _index, _index_put,
                                   _select_scatter)

# Ops the runtime runs as one kernel although torch._decomp has a
# decomposition:
# - softmax, log_softmax, layer-norm backward: torch._decomp's versions make
#   many passes over memory;
# - aten._to_copy: 1.13's decomposition (to prims.convert_element_type)
#   fails under vmap on `0-d tensor * float`, which per-sample eval losses
#   such as `0.9 * loss` hit;
# - batch norm: one kernel each way instead of ~10 reductions and pointwise
#   passes (the exporter's F.batch_norm stand-in, patches.py, keeps the op
#   functional);
# - addmm: 2.x keeps it; 1.13's decomposition computes in float32 (opmath),
#   which under bfloat16 autocast widens both operands and runs the linear
#   layer as a float32 mm instead of a bfloat16 product.
KEEP = {"aten.native_layer_norm_backward.default", "aten.addmm.default",
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
    if hasattr(torch.ops.prims, "copy_strided"):  # 2.x's refs only
        table[torch.ops.prims.copy_strided.default] = _copy_strided
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
            A.var.correction: _var, A.pow.Scalar: _pow_scalar,
            # 1.13 leaves lerp and vector_norm whole (Muon, clip_grad_norm_);
            # both leave clamp with tensor bounds (a traced LR in AdaBound).
            A.lerp.Scalar: _lerp, A.lerp.Tensor: _lerp,
            A.linalg_vector_norm.default: _vector_norm,
            A.clamp.Tensor: _clamp_tensor}
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


def _lerp(x, end, weight):
    """torch's lerp: x + w (end - x) where |w| < 0.5, else end - (end - x)(1 - w),
    as its kernel computes it (1.13 has no decomposition)."""
    if isinstance(weight, torch.Tensor):
        small = weight.abs() < 0.5
        return torch.where(small, x + weight * (end - x), end - (end - x) * (1 - weight))
    if abs(weight) < 0.5:
        return x + weight * (end - x)
    return end - (end - x) * (1 - weight)


def _vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None):
    """linalg.vector_norm as reductions (1.13 has no decomposition)."""
    if dtype is not None:
        x = x.to(dtype)
    dims = list(range(x.dim())) if dim is None or dim == [] else dim
    a = x.abs()
    if ord == float("inf"):
        return a.amax(dims, keepdim=keepdim)
    if ord == float("-inf"):
        return a.amin(dims, keepdim=keepdim)
    if ord == 0:
        return (x != 0).to(x.dtype).sum(dims, keepdim=keepdim)
    if ord == 1:
        return a.sum(dims, keepdim=keepdim)
    if ord == 2:
        return (x * x).sum(dims, keepdim=keepdim).sqrt()
    return a.pow(ord).sum(dims, keepdim=keepdim).pow(1.0 / ord)


def _clamp_tensor(x, min=None, max=None):
    """clamp with tensor bounds (a traced LR or step count makes them 0-d
    tensors): maximum, then minimum, in x's dtype."""
    if min is not None:
        x = torch.maximum(x, min.to(x.dtype))
    if max is not None:
        x = torch.minimum(x, max.to(x.dtype))
    return x


def _copy_strided(x, stride):
    """prims.copy_strided (2.x's refs keep a tensor's strides with it, as
    ConvNeXt's permuted LayerNorm reaches): a copy; the runtime's tensors
    are dense, and the values are the same whatever the strides."""
    return x.clone()
