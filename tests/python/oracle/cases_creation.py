"""Oracle cases: constant-producing ops (src/ops/creation.cpp). With every
pass on, 0-d results are folded at compile time (fold_constants), so the
opt mode also checks the folded values."""
import torch

from .harness import In, Node, Program, Case, neg_case, op_case

F, D, I, I32, U8, B = "float32", "float64", "int64", "int32", "uint8", "bool"


def _constant(value, dtype, wrapped):
    """A lone trainstep.constant; torch's reference is the 0-d tensor its
    attrs describe (a wrapped float is a double, as in PyTorch)."""
    attrs = {"value": value, "dtype": dtype, "wrapped": wrapped}
    v = float(value) if isinstance(value, str) else value
    nat = ("bool" if isinstance(v, bool) else "int64" if isinstance(v, int) else
           "float64" if wrapped else "float32")
    want = torch.tensor(v, dtype=getattr(torch, dtype or nat))
    return Case("trainstep.constant", Program({}, [Node("trainstep.constant", [], attrs)]),
                ref=lambda: want)


def _consts():
    out = [_constant(v, dt, w) for v, dt, w in
           [(2.5, F, False), (2.5, None, True), (3, None, True), (True, None, False), (-7, I32, False),
            ("inf", F, False), ("-inf", D, False), ("nan", F, False), (0.1, D, True), (1, B, False),
            (200, U8, False), (1e-3, None, False)]]
    # A wrapped constant feeding an op promotes like a Python number.
    out.append(Case("trainstep.constant", Program(
        {"x": In((3, 4), I)},
        [Node("trainstep.constant", [], {"value": 0.5, "dtype": "float64", "wrapped": True}),
         Node("aten.mul.Tensor", ["x", "n0"])]), ref=lambda x: x * 0.5))
    return out


def _fills():
    out = []
    op = "aten.scalar_tensor.default"
    out += [op_case(op, s=v, dtype=dt) for v, dt in ((2.5, None), (3, I), (1.5, D), (0, B), ("inf", None))]
    for op, extra in (("aten.new_full.default", {"fill_value": 1.5}), ("aten.new_zeros.default", {}),
                      ("aten.new_ones.default", {})):
        out += [op_case(op, In((2, 3), dt), size=[4, 5], dtype=None, **extra) for dt in (F, I, B)]
        out += [op_case(op, In((2, 3)), size=[3], dtype=I, **extra), op_case(op, In((2,)), size=[], **extra),
                op_case(op, In((2,), I), size=[0, 2], dtype=D, **extra)]
    out += [op_case("aten.new_full.default", In((2,), I), size=[3], fill_value=2.7),
            op_case("aten.new_full.default", In((2,)), size=[3], fill_value="-inf")]
    # fill_value True with dtype null: torch.full gives bool, but the traced
    # aten.full.default (what the artifact records) gives int64 in torch
    # 1.13, and we follow eager (bool); not a case until the two agree.
    op = "aten.full.default"
    out += [op_case(op, size=s, fill_value=v, dtype=dt) for s, v, dt in
            (([2, 3], 1.5, None), ([4], 3, None), ([2, 2], True, B), ([3], 2, F), ([], 0.25, None),
             ([2, 0], 1.0, None), ([129, 257], -2.0, None), ([3], "nan", D), ([5], 7, U8))]
    for op, extra in (("aten.full_like.default", {"fill_value": -3.5}), ("aten.zeros_like.default", {}),
                      ("aten.ones_like.default", {})):
        out += [op_case(op, In((2, 3), dt), dtype=None, **extra) for dt in (F, I, B, D)]
        out += [op_case(op, In((2, 3)), dtype=I, **extra), op_case(op, In(()), **extra),
                op_case(op, In((129, 257)), **extra)]
    out.append(op_case("aten.full_like.default", In((4,), I), fill_value=2.9))
    return out


def _aranges():
    out = []
    op = "aten.arange.default"
    out += [op_case(op, end=e, dtype=dt) for e, dt in ((5, None), (5.5, None), (1, None), (0, None),
                                                       (7, F), (3.2, D), (100000, None), (10, I32))]
    op = "aten.arange.start_step"
    out += [op_case(op, start=s, end=e, step=st, dtype=dt) for s, e, st, dt in
            ((2, 9, 2, None), (0.0, 1.0, 0.1, None), (-3, 3, 1, F), (10, 0, -3, None),
             (1.5, 4, 0.5, D), (0, 1, 0.3, None), (5, 5, 1, None), (0, 100000, 7, None))]
    return out


def _negatives():
    cplx = [neg_case(op, In((2,)), dtype="complex64", types=[{"dtype": F, "shape": [2]}],
                     error="unknown dtype 'complex64'", unsupported="no complex dtypes", **extra)
            for op, extra in (("aten.full_like.default", {"fill_value": 1.0}), ("aten.zeros_like.default", {}),
                              ("aten.ones_like.default", {}))]
    cplx += [neg_case(op, In((2,)), size=[2], dtype="complex64", types=[{"dtype": F, "shape": [2]}],
                      error="unknown dtype 'complex64'", unsupported="no complex dtypes", **extra)
             for op, extra in (("aten.new_full.default", {"fill_value": 1.0}), ("aten.new_ones.default", {}))]
    return cplx + [
        neg_case("trainstep.constant", value="x", dtype=None, wrapped=False,
                 error="attribute 'value' must be a number", unsupported="no torch op"),
        neg_case("aten.scalar_tensor.default", s="x", error="attribute 's' must be a number"),
        neg_case("aten.full.default", size=[2, -1], fill_value=1.0, error="negative size in [2, -1]"),
        neg_case("aten.new_zeros.default", In((2,)), size=[-3], error="negative size in [-3]"),
        neg_case("aten.arange.start_step", start=0, end=5, step=0, error="arange step must be nonzero"),
        neg_case("aten.arange.start_step", start=0, end=5, step=-1,
                 error="arange: step has the wrong sign for start/end"),
        neg_case("aten.arange.default", end="inf", error="arange bounds must be finite"),
    ]


def cases():
    return _consts() + _fills() + _aranges() + _negatives()
