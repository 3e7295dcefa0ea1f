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
    return table


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
