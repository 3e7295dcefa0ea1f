"""The exporter's capture-time stand-ins (python/trainstep/patches.py)
compute what the library functions they replace compute, in eager mode:
values, gradients and BatchNorm's running stats."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from trainstep import patches


def _ce_cases():
    g = torch.Generator().manual_seed(0)
    w = torch.rand(5, generator=g) + 0.5
    for shape, tshape in (((6, 5), (6,)), ((4, 5, 3), (4, 3)), ((5,), ())):
        for weight in (None, w):
            for reduction in ("mean", "sum", "none"):
                for smoothing in (0.1, 0.5):
                    yield shape, tshape, weight, reduction, smoothing


@pytest.mark.parametrize("shape,tshape,weight,reduction,smoothing", list(_ce_cases()))
def test_cross_entropy_label_smoothing(shape, tshape, weight, reduction, smoothing):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    t = torch.randint(0, 5, tshape, generator=g)
    if t.dim():
        t.view(-1)[1] = -100  # an ignored target
    kw = dict(weight=None if weight is None else weight.double(), reduction=reduction,
              label_smoothing=smoothing)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = F.cross_entropy(xa, t, **kw)
    got = patches.cross_entropy(xb, t, **kw)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    want.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("momentum", [0.1, 0.7, None])
@pytest.mark.parametrize("bn,shape", [(nn.BatchNorm1d, (8, 3)), (nn.BatchNorm1d, (8, 3, 5)),
                                      (nn.BatchNorm2d, (4, 3, 5, 5))])
def test_batch_norm_running_stats(bn, shape, momentum):
    torch.manual_seed(2)
    eager = bn(3, momentum=momentum)
    with torch.no_grad():
        eager.weight.uniform_(0.5, 1.5)
        eager.bias.uniform_(-1, 1)
    ours = copy.deepcopy(eager)
    for step in range(3):
        x = torch.randn(shape) * (step + 1) + step
        want = eager(x)
        with patches.applied():
            got = ours(x)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert int(ours.num_batches_tracked) == int(eager.num_batches_tracked) == 3
    torch.testing.assert_close(ours.running_mean, eager.running_mean, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(ours.running_var, eager.running_var, rtol=1e-6, atol=1e-7)
    eager.eval()
    ours.eval()
    x = torch.randn(shape)
    with patches.applied():
        torch.testing.assert_close(ours(x), eager(x), rtol=1e-6, atol=1e-6)


def test_patches_are_undone():
    saved = (F.cross_entropy, F.batch_norm, nn.modules.batchnorm._BatchNorm.forward)
    with patches.applied():
        assert F.cross_entropy is patches.cross_entropy
    assert (F.cross_entropy, F.batch_norm, nn.modules.batchnorm._BatchNorm.forward) == saved


def _writes_as_torch(x, key, value):
    """patches.setitem writes what Tensor.__setitem__ writes into a copy of x."""
    want, got = x.clone(), x.clone()
    want[key] = value
    patches.setitem(got, key, value)
    assert torch.equal(got, want), (x.shape, key)


def test_setitem_through_sliced_index_tensors_writes_what_torch_writes():
    """patches.setitem (1.13's capture form of x[:, i, j] = v) against
    Tensor.__setitem__ itself, on random shapes, index shapes and value
    broadcasts; keys it does not rewrite pass through."""
    from trainstep import patches
    g = torch.Generator().manual_seed(3)
    rewritten = 0
    for _ in range(40):
        x = torch.randn(*torch.randint(2, 5, (4,), generator=g).tolist(), generator=g)
        k = int(torch.randint(1, 3, (1,), generator=g))
        n = int(torch.randint(1, 3, (1,), generator=g))
        shape = [int(torch.randint(1, 3, (1,), generator=g)) for _ in range(n)]
        idx = tuple(torch.randint(-x.shape[k + d], x.shape[k + d], shape, generator=g)
                    for d in range(2))
        key = (slice(None),) * k + idx
        full = x[key].shape
        for value in (torch.randn(full, generator=g), torch.randn(full[-1:], generator=g), 1.5):
            _writes_as_torch(x, key, value)
            rewritten += patches._sliced_index(x, key) is not None
    assert rewritten == 120
    for key in (0, (slice(1, None), torch.tensor([0])), (Ellipsis, torch.tensor([1]))):
        assert patches._sliced_index(x, key) is None


def test_setitem_through_index_tensors_apart_writes_what_torch_writes():
    """x[i, :, j] = v: torch puts the index dims first when a slice parts
    the index tensors; the aranges must read and write the same elements in
    the same layout, on random shapes, slice places and index shapes."""
    g = torch.Generator().manual_seed(5)

    def r(lo, hi):
        return int(torch.randint(lo, hi, (1,), generator=g))

    for _ in range(40):
        x = torch.randn(*[r(2, 5) for _ in range(r(3, 6))], generator=g)
        # index tensors at both ends of a span with a full slice inside it
        first = r(0, x.dim() - 2)
        last = r(first + 2, x.dim())
        inner = [d for d in range(first + 1, last) if r(0, 2)] or [first + 1]
        shape = [r(1, 3) for _ in range(r(1, 3))]
        key = tuple(slice(None) if d < first or d in inner or d > last else
                    torch.randint(-x.shape[d], x.shape[d], shape[r(0, len(shape)):], generator=g)
                    for d in range(x.dim()))
        new = patches._sliced_index(x, key)
        assert new is not None, key
        assert torch.equal(x[new], x[key]), (x.shape, key)
        full = x[key].shape
        for value in (torch.randn(full, generator=g), torch.randn(full[-1:], generator=g), 1.5):
            _writes_as_torch(x, key, value)
    # A 0-d index is an int to torch, which changes what goes first; a mask
    # is not an integer index: both pass through.
    x = torch.randn(2, 3, 4)
    for key in ((torch.tensor(1), slice(None), torch.tensor([0, 3])),
                (torch.tensor([True, False]), slice(None), torch.tensor([0, 3]))):
        assert patches._sliced_index(x, key) is None


def test_setitem_through_a_mask_after_slices_writes_what_torch_writes():
    """x[:, mask] = v (1.13 cannot trace a mask after a slice): where() over
    the mask at its dims, against Tensor.__setitem__ on random shapes, mask
    places and broadcast values; values sized by the mask's count are left
    to torch (data-dependent: the capture refuses them)."""
    from trainstep import patches
    g = torch.Generator().manual_seed(7)

    def r(lo, hi):
        return int(torch.randint(lo, hi, (1,), generator=g))

    for _ in range(30):
        x = torch.randn(*[r(2, 5) for _ in range(r(2, 5))], generator=g)
        first = r(1, x.dim())
        m = r(1, x.dim() - first + 1)
        mask = torch.rand(x.shape[first:first + m], generator=g) > 0.5
        key = (slice(None),) * first + (mask,)
        rest = x.shape[first + m:]
        for value in (1.5, torch.tensor(-2.0), torch.randn(1, generator=g),
                      torch.randn(rest, generator=g), torch.randn(rest[-1:], generator=g)):
            assert patches._sliced_mask(x, key, value) is not None, (x.shape, first, m)
            _writes_as_torch(x, key, value)
        count = int(mask.sum())
        if count > 1:  # one value per selected element: x[:, mask] = y[:, mask]
            assert patches._sliced_mask(x, key, torch.randn(count, *rest)) is None


@pytest.mark.parametrize("shape,classes", [((7,), 4), ((2, 3, 5), 6), ((), 3)])
def test_one_hot_with_num_classes(shape, classes):
    g = torch.Generator().manual_seed(2)
    t = torch.randint(0, classes, shape, generator=g)
    want = F.one_hot(t, classes)
    got = patches.one_hot(t, classes)
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_one_hot_loss_exports_and_verifies(tmp_path):
    """A Dice loss over F.one_hot(target, num_classes) (segmentation
    libraries' way), under both torches."""
    import os
    from conftest import SPECS, run
    art = tmp_path / "dice.tstep"
    run("export", os.path.join(SPECS, "one_hot_dice.py"), "--out", art)
    p = run("verify", art, "--threads", "1", check=False)
    assert p.returncode == 0 and p.stdout.strip().splitlines()[-1] == "verify: ok", p.stdout


@pytest.mark.parametrize("kind", ["ce", "nll", "smooth"])
def test_negative_ignore_index_exports_and_verifies(tmp_path, kind):
    """minGPT's ignore_index=-1: torch 1.13's nll_loss decomposition and its
    vmap rule gather at -1 and fail; the stand-in masks it (both torches
    verify)."""
    import os
    from conftest import SPECS, run
    art = str(tmp_path / "ii.tstep")
    run("export", os.path.join(SPECS, "ignore_index_lm.py"), "--out", art, env={"II": kind})
    v = run("verify", art, "--threads", "1", check=False)
    assert v.returncode == 0 and v.stdout.strip().splitlines()[-1] == "verify: ok", v.stdout


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted,smoothing", [(False, 0.0), (True, 0.0), (True, 0.2)])
def test_ignored_targets_masked_as_torch_reduces(reduction, weighted, smoothing):
    """The masking path against torch's own cross_entropy, which takes -1
    eagerly."""
    g = torch.Generator().manual_seed(5)
    x, t = torch.randn(10, 4, generator=g), torch.randint(0, 4, (10,), generator=g)
    t[[0, 3, 4]] = -1
    w = torch.rand(4, generator=g) + 0.5 if weighted else None
    got = patches._ignored_masked(patches.cross_entropy, x, t, w, -1, reduction,
                                  label_smoothing=smoothing)
    want = F.cross_entropy(x, t, w, ignore_index=-1, reduction=reduction,
                           label_smoothing=smoothing)
    torch.testing.assert_close(got, want)
