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
    return table


def _fallbacks():
    A = torch.ops.aten
    ours = {A.pixel_shuffle.default: _pixel_shuffle, A.pixel_unshuffle.default: _pixel_unshuffle,
            A.elu.default: _elu, A.celu.default: _celu, A.leaky_relu.default: _leaky_relu,
            A.hardtanh.default: _hardtanh, A.softplus.default: _softplus, A.mish.default: _mish,
            A.sgn.default: _sgn}
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
