"""The Philox generator: the published Random123 known answers, and the
counter layout of uniform() (the C++ kernel follows the same spec; the
parity tests check both produce identical dropout masks)."""
import numpy as np
import torch

from trainstep import rng


def test_philox_known_answers():
    # Random123's kat_vectors for philox4x32_10.
    assert [int(x) for x in rng.philox4x32_10(0, 0, 0, 0, 0, 0)] == \
        [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    m = 0xFFFFFFFF
    assert [int(x) for x in rng.philox4x32_10(m, m, m, m, m, m)] == \
        [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]


def test_uniform_layout_and_range():
    u = rng.uniform(seed=7, offset=3, shape=[3, 5], key=2).reshape(-1)
    # Element i is word i&3 of counter (i>>2, 0, key, offset), key (seed, 0).
    for i in (0, 5, 14):
        w = rng.philox4x32_10(i >> 2, 0, 2, 3, 7, 0)[i & 3]
        assert u[i].item() == np.float32(int(w) >> 8) * np.float32(2.0 ** -24)
    assert u.dtype == torch.float32 and (u >= 0).all() and (u < 1).all()


def test_streams_differ_by_key_offset_seed():
    base = rng.uniform(1, 0, [64], 0)
    for other in (rng.uniform(1, 0, [64], 1), rng.uniform(1, 1, [64], 0), rng.uniform(2, 0, [64], 0)):
        assert not torch.equal(base, other)
    assert torch.equal(base, rng.uniform(1, 0, [64], 0))
