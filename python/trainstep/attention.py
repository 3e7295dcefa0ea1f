"""F.scaled_dot_product_attention (torch >= 2.0) written as its math, for
the capture: softmax(q kᵀ · scale + mask) v, with dropout on the weights.

torch's fused SDPA kernels (flash / efficient / math) draw dropout from
torch's own generator and decompose differently per version; this form
uses only ops the runtime has (matmul, masked_fill, softmax, arange
comparisons) and draws dropout through F.dropout, which trainstep's RNG
stream replaces (rng.py). The stream is the one place that patches
F.scaled_dot_product_attention, with `patched`: the math form runs while
the capture traces, so `verify` checks it against the real kernel, and in
the eager golden run when dropout_p > 0, so both draw the same masks.
"""
import math

import torch
import torch.nn.functional as F

from . import environment


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    L, S = query.shape[-2], key.shape[-2]
    if is_causal and attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention: is_causal with an explicit attn_mask")
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = torch.matmul(query, key.transpose(-2, -1)) * factor
    if is_causal:
        # torch's is_causal is the top-left lower triangle: query i sees keys 0..i.
        rows = torch.arange(L).unsqueeze(1)
        cols = torch.arange(S).unsqueeze(0)
        scores = scores.masked_fill(cols > rows, float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype == torch.bool:  # True: may attend
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    return torch.matmul(weights, value)


def original():
    """torch's own SDPA, or None on a torch without one (1.13)."""
    return getattr(F, "scaled_dot_product_attention", None)


def patched(sdpa):
    """F.scaled_dot_product_attention while rng.stream is active: the math
    form while the capture traces (environment.tracing) or with
    dropout_p > 0 (its dropout then draws from the stream), else `sdpa`
    (torch's kernel)."""
    def run(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        if dropout_p > 0.0 or environment.tracing:
            return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
                                                is_causal, **kwargs)
        return sdpa(query, key, value, attn_mask, dropout_p, is_causal, **kwargs)
    return run
