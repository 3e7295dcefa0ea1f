"""trainstep's own decompositions (python/trainstep/decompositions.py) for
ops one torch leaves whole or lowers wrongly, each against torch's own op
on random inputs: the ops user optimizers reach (lerp, vector norms, clamp
with a traced bound). 1.13's nll_loss with a negative ignore_index is
patches.py's (its vmap rule fails as its decomposition does)."""
import pytest
import torch

from trainstep import decompositions as D

A = torch.ops.aten


def _close(got, want):
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_lerp_matches_torch():
    g = torch.Generator().manual_seed(0)
    x, end = torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g)
    for w in (0.0, 0.1, 0.49, 0.5, 0.95, -0.3, 1.7):
        _close(D._lerp(x, end, w), A.lerp.Scalar(x, end, w))
    w = torch.rand(4, 5, generator=g) * 2 - 0.5
    _close(D._lerp(x, end, w), A.lerp.Tensor(x, end, w))


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, 0, float("inf"), float("-inf")])
def test_vector_norm_matches_torch(ord):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, 5, generator=g)
    x[0, 0, :2] = 0
    for dim, keep in ((None, False), ([1], True), ([0, 2], False)):
        _close(D._vector_norm(x, ord, dim, keep),
               A.linalg_vector_norm.default(x, ord, dim, keep))
    _close(D._vector_norm(x, ord, dtype=torch.float64),
           A.linalg_vector_norm.default(x, ord, dtype=torch.float64))


def test_clamp_with_tensor_bounds_matches_torch():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(6, 7, generator=g)
    lo, hi = torch.tensor(-0.3, dtype=torch.float64), torch.tensor(0.4, dtype=torch.float64)
    for a, b in ((lo, hi), (lo, None), (None, hi)):
        _close(D._clamp_tensor(x, a, b), A.clamp.Tensor(x, a, b))


@pytest.mark.parametrize("op", [A.lerp.Scalar, A.linalg_vector_norm.default, A.clamp.Tensor])
def test_the_table_lowers_them(op):
    assert op in D.decomposition_table()
