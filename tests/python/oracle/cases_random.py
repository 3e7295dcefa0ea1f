"""Oracle cases: the Philox random ops (src/ops/random.cpp) against the
numpy Philox4x32-10 in python/trainstep/rng.py (torch.ops.trainstep.philox_*
run it), for several seeds (including ones with high 32-bit words),
offsets, keys and shapes."""
import torch

from .harness import In, neg_case, op_case

I = "int64"


def _scalar(v):
    return torch.tensor(v, dtype=torch.int64)


def cases():
    out = []
    draws = [(0, 0, [7], 0), (1, 5, [3, 5], 3), (2 ** 40 + 5, 7, [2, 3, 4], 1), (123, 2 ** 32 + 9, [1000], 2),
             (-1, 0, [], 0), (42, 1, [129, 257], 5), (7, 3, [0, 3], 0), (2 ** 63 - 1, 4, [9], 2 ** 31)]
    for op in ("trainstep.philox_uniform.default", "trainstep.philox_normal.default"):
        # uniforms are exact; normals go through float64 log/cos in numpy and libm.
        tol = (0.0, 0.0) if "uniform" in op else (1e-6, 1e-7)
        out += [op_case(op, _scalar(s), _scalar(o), shape=shape, key=k, tol=tol) for s, o, shape, k in draws]
    out += [neg_case("trainstep.philox_uniform.default", In((2,), I), _scalar(0), shape=[3], key=0,
                     error="seed and offset must be 0-d int64 tensors"),
            neg_case("trainstep.philox_normal.default", _scalar(0), _scalar(0), shape=[2, -1], key=0,
                     error="negative size in shape [2, -1]")]
    return out
