"""The one deterministic RNG: Philox4x32-10, keyed on (seed, offset, key).

The C++ runtime implements the identical function (src/ops/philox.h), so a
step with dropout on gives the same masks in eager PyTorch (golden trace),
in the traced graph and in C++. Spec: docs/format.md, "Random numbers".

Every random op in a step gets its own `key` (0, 1, 2, … in call order);
`offset` is the global step index; `seed` is the run's seed.
"""
import contextlib
import math
import threading

import numpy as np
import torch

from . import attention, rnn

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Vectorised Philox4x32-10 on uint64 arrays holding 32-bit words."""
    c = [np.asarray(x, dtype=np.uint64) & MASK32 for x in (c0, c1, c2, c3)]
    k0 = np.uint64(k0) & MASK32
    k1 = np.uint64(k1) & MASK32
    for _ in range(10):
        p0 = M0 * c[0]
        p1 = M1 * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & MASK32
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        k0 = (k0 + W0) & MASK32
        k1 = (k1 + W1) & MASK32
    return c


def _key_words(seed):
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    return s & 0xFFFFFFFF, s >> 32


def uniform(seed, offset, shape, key):
    """float32 uniforms in [0, 1): element i uses word i&3 of counter
    (lo32(i>>2), hi32(i>>2), key, offset)."""
    n = math.prod(shape)
    blocks = (n + 3) // 4
    b = np.arange(blocks, dtype=np.uint64)
    k0, k1 = _key_words(seed)
    words = philox4x32_10(b & MASK32, b >> np.uint64(32), np.full(blocks, key, np.uint64),
                          np.full(blocks, int(offset) & 0xFFFFFFFF, np.uint64), k0, k1)
    x = np.stack(words, axis=1).reshape(-1)[:n]
    u = (x >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24)
    return torch.from_numpy(u.reshape(shape).copy())


def normal(seed, offset, shape, key):
    """float32 standard normals by Box-Muller, one counter per element:
    (lo32(i), hi32(i), key, offset); computed in float64, rounded once."""
    n = math.prod(shape)
    i = np.arange(n, dtype=np.uint64)
    k0, k1 = _key_words(seed)
    x0, x1, _, _ = philox4x32_10(i & MASK32, i >> np.uint64(32), np.full(n, key, np.uint64),
                                 np.full(n, int(offset) & 0xFFFFFFFF, np.uint64), k0, k1)
    u1 = ((x0 >> np.uint64(8)).astype(np.float64) + 1.0) * 2.0 ** -24
    u2 = (x1 >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
    z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)
    return torch.from_numpy(z.astype(np.float32).reshape(shape).copy())


# Custom ops, so that tracing records one node per random draw.
_lib = torch.library.Library("trainstep", "DEF")
_lib.define("philox_uniform(Tensor seed, Tensor offset, int[] shape, int key) -> Tensor")
_lib.define("philox_normal(Tensor seed, Tensor offset, int[] shape, int key) -> Tensor")
_lib.impl("philox_uniform", lambda s, o, shape, key: uniform(s.item(), o.item(), shape, key), "CPU")
_lib.impl("philox_normal", lambda s, o, shape, key: normal(s.item(), o.item(), shape, key), "CPU")


class _State(threading.local):
    active = False
    seed = None
    offset = None
    key = 0


_state = _State()


# The eval step's draws (a VAE sampling in eval mode) take keys from here
# up, so they never repeat a training step's draws at the same offset; the
# eval offset counts eval batches (docs/format.md, "Random numbers").
EVAL_KEY_BASE = 1 << 31


@contextlib.contextmanager
def stream(seed, offset, key_base=0):
    """Within this block, dropout and friends draw from Philox(seed, offset),
    with keys key_base, key_base + 1, ... in call order.

    seed and offset are int64 0-d tensors (graph inputs when tracing)."""
    prev = (_state.active, _state.seed, _state.offset, _state.key)
    _state.active, _state.seed, _state.offset, _state.key = True, seed, offset, key_base
    try:
        with _patched_functions():
            yield
    finally:
        _state.active, _state.seed, _state.offset, _state.key = prev


def _next_key():
    k = _state.key
    _state.key += 1
    return k


def draw_uniform(shape):
    return torch.ops.trainstep.philox_uniform(_state.seed, _state.offset, list(shape), _next_key())


def draw_normal(shape):
    return torch.ops.trainstep.philox_normal(_state.seed, _state.offset, list(shape), _next_key())


def _masked(x, p, training, mask_shape, drop):
    """Shared by the dropouts: x unchanged when off, zeros at p = 1 (as
    torch), else drop(x, keep) with keep = (u >= p) drawn in mask_shape."""
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    return drop(x, draw_uniform(mask_shape) >= p)


def dropout(x, p=0.5, training=True, inplace=False):
    """F.dropout with the trainstep RNG: keep where u >= p, scale by 1/(1-p)."""
    return _masked(x, p, training, x.shape, lambda x, keep: x * keep / (1.0 - p))


def _channel_mask_shape(x, spatial=None):
    """Shape of a per-channel mask: (N, C, 1, ...), or (C, 1, ...) where torch
    reads the input as unbatched: F.dropout1d/3d given any rank but 3 / 5.
    F.dropout2d (spatial 2) masks (N, C) at every rank (a 3-d input is
    (N, C, L) to torch), as does feature alpha dropout (spatial None)."""
    if spatial == 1 and x.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {x.dim()}D input")
    lead = 1 if spatial in (1, 3) and x.dim() != spatial + 2 else 2
    return list(x.shape[:lead]) + [1] * (x.dim() - lead)


def _channel_dropout(spatial):
    """F.dropout1d/2d/3d on the stream: whole channels zeroed, scale 1/(1-p)."""
    def run(x, p=0.5, training=True, inplace=False):
        return _masked(x, p, training, _channel_mask_shape(x, spatial),
                       lambda x, keep: x * keep / (1.0 - p))
    return run


# SELU's negative saturation, -scale * alpha: what alpha dropout drops to.
_ALPHA_PRIME = -1.7580993408473766


def _alpha(feature):
    """F.alpha_dropout (feature=False) and F.feature_alpha_dropout on the
    stream: dropped units take SELU's saturation value, then an affine map
    keeps mean 0 and variance 1 (torch's formula)."""
    def run(x, p=0.5, training=False, inplace=False):
        def drop(x, keep):
            keep = keep.to(x.dtype)
            a = ((_ALPHA_PRIME ** 2 * p + 1) * (1 - p)) ** -0.5
            return (x * keep + _ALPHA_PRIME * (1 - keep)) * a - a * _ALPHA_PRIME * p
        shape = _channel_mask_shape(x) if feature else x.shape
        return _masked(x, p, training, shape, drop)
    return run


def _rand_like(x, *args, dtype=None, **kwargs):
    return draw_uniform(x.shape).to(dtype or x.dtype)


def _randn_like(x, *args, dtype=None, **kwargs):
    return draw_normal(x.shape).to(dtype or x.dtype)


def _sizes(size):
    """torch.rand(2, 3) and torch.rand((2, 3)) alike."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = size[0]
    return [int(d) for d in size]


def _rand(*size, dtype=None, **kwargs):
    return draw_uniform(_sizes(size)).to(dtype or torch.get_default_dtype())


def _randn(*size, dtype=None, **kwargs):
    return draw_normal(_sizes(size)).to(dtype or torch.get_default_dtype())


def _bernoulli(x, p=None, **kwargs):
    """torch.bernoulli(probs) (or probability p): 1 where u < p."""
    prob = x if p is None else p
    return (draw_uniform(x.shape) < prob).to(x.dtype)


def _bernoulli_(self, p=0.5, **kwargs):
    """Tensor.bernoulli_(p), stochastic depth's mask (torchvision's
    EfficientNet, ConvNeXt): self filled with draws, as the in-place op."""
    return self.copy_((draw_uniform(self.shape) < p).to(self.dtype))


@contextlib.contextmanager
def _patched_functions():
    import torch.nn.functional as F
    saved = (F.dropout, torch.rand_like, torch.randn_like, torch.rand, torch.randn,
             torch.bernoulli, torch.Tensor.bernoulli_)
    sdpa = attention.original()
    (F.dropout, torch.rand_like, torch.randn_like, torch.rand, torch.randn, torch.bernoulli,
     torch.Tensor.bernoulli_) = (dropout, _rand_like, _randn_like, _rand, _randn, _bernoulli,
                                 _bernoulli_)
    extra = {"dropout1d": _channel_dropout(1), "dropout2d": _channel_dropout(2),
             "dropout3d": _channel_dropout(3), "alpha_dropout": _alpha(False),
             "feature_alpha_dropout": _alpha(True)}
    extra = {k: v for k, v in extra.items() if hasattr(F, k)}  # dropout1d: torch >= 1.12
    saved_extra = {k: getattr(F, k) for k in extra}
    for k, v in extra.items():
        setattr(F, k, v)
    if sdpa is not None:
        F.scaled_dot_product_attention = attention.patched(sdpa)  # its one patch
    try:
        with rnn.layered_dropout(dropout):
            yield
    finally:
        (F.dropout, torch.rand_like, torch.randn_like, torch.rand, torch.randn, torch.bernoulli,
         torch.Tensor.bernoulli_) = saved
        for k, v in saved_extra.items():
            setattr(F, k, v)
        if sdpa is not None:
            F.scaled_dot_product_attention = sdpa
