"""The few torch APIs whose home or form differs between 1.13 and 2.x (the
capture's decompositions are decompositions.py's)."""
import contextlib

import torch

try:  # torch >= 2.0
    from torch.func import functional_call, grad_and_value, functionalize, vmap
except ImportError:  # torch 1.13: functorch and nn.utils.stateless
    from functorch import grad_and_value, functionalize, vmap
    from torch.nn.utils.stateless import functional_call

from torch.fx.experimental.proxy_tensor import make_fx


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


__all__ = ["functional_call", "grad_and_value", "functionalize", "vmap", "make_fx",
           "mkldnn_off", "torch"]
