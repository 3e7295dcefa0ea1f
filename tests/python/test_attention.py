"""Attention as models write it on torch 2.x: F.scaled_dot_product_attention
called directly (nanoGPT style: is_causal, attn_mask bool or float,
dropout_p in training) and nn.TransformerEncoderLayer, whose attention runs
through SDPA on 2.x and through baddbmm/bmm on 1.13. Each exports and
verifies tightly under whichever torch runs the suite; the math form the
capture uses (trainstep/attention.py) is checked against torch's kernel."""
import os

import pytest
import torch
import torch.nn.functional as F

from conftest import SPECS, export, run
from trainstep import attention

HAS_SDPA = attention.original() is not None
needs_sdpa = pytest.mark.skipif(not HAS_SDPA, reason="torch < 2.0 has no scaled_dot_product_attention")


def _verify(path, tol="1e-4"):
    p = run("verify", path, "--tol", tol, check=False)
    assert p.stdout.strip().splitlines()[-1:] == ["verify: ok"], p.stdout + p.stderr
    return p.stdout


@needs_sdpa
@pytest.mark.parametrize("mask", ["", "bool", "float"])
def test_sdpa_gpt_verifies(tmp_path, monkeypatch, mask):
    monkeypatch.setenv("SDPA_MASK", mask)
    path = export(os.path.join(SPECS, "sdpa_gpt.py"), str(tmp_path / "gpt.tstep"))
    _verify(path)
    # dropout_p > 0 inside SDPA draws from the shared Philox stream
    ops = run("inspect", path).stdout
    assert "trainstep.philox_uniform" in ops, ops


def test_transformer_encoder_layer_verifies(tmp_path):
    path = export(os.path.join(SPECS, "mha_encoder.py"), str(tmp_path / "enc.tstep"))
    _verify(path)


@needs_sdpa
@pytest.mark.parametrize("case", ["plain", "causal", "bool_mask", "float_mask", "scale", "gqa",
                                  "cross"])
def test_math_form_matches_torch(case):
    g = torch.Generator().manual_seed(hash(case) % 1000)
    B, H, L, S, E = 2, 4, 5, 7, 8
    if case != "cross":
        S = L
    q = torch.randn(B, H, L, E, generator=g)
    kv_heads = 2 if case == "gqa" else H
    k = torch.randn(B, kv_heads, S, E, generator=g)
    v = torch.randn(B, kv_heads, S, E, generator=g)
    kw = {}
    if case == "causal":
        kw["is_causal"] = True
    elif case == "bool_mask":
        m = torch.rand(L, S, generator=g) > 0.3
        m[:, 0] = True  # no row fully masked
        kw["attn_mask"] = m
    elif case == "float_mask":
        kw["attn_mask"] = torch.randn(B, 1, L, S, generator=g)
    elif case == "scale":
        kw["scale"] = 0.3
    elif case == "gqa":
        kw["enable_gqa"] = True
    want = F.scaled_dot_product_attention(q, k, v, **kw)
    got = attention.scaled_dot_product_attention(q, k, v, **kw)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
