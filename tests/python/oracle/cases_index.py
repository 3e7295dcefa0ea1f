"""Oracle cases: gather, scatter (value, src), scatter_add, index_select,
index_put (src/ops/index.cpp). Indices are drawn in range; run-time range errors are
negative cases."""
import torch

from .harness import In, neg_case, op_case, viewed

F, D, I, I32, U8, B = "float32", "float64", "int64", "int32", "uint8", "bool"


def _idx(shape, hi):
    return In(shape, I, lo=0, hi=hi)


def _perm_idx(shape, dim, seed):
    """An index of `shape` whose entries along dim are distinct (no
    duplicate writes, so scatter's result does not depend on order)."""
    g = torch.Generator().manual_seed(seed)
    n = shape[dim]
    moved = [s for i, s in enumerate(shape) if i != dim] + [n]
    rows = int(torch.tensor(moved[:-1]).prod()) if len(moved) > 1 else 1
    idx = torch.stack([torch.randperm(n, generator=g) for _ in range(rows)]).reshape(moved)
    return idx.movedim(-1, dim).contiguous()


def _gather():
    op = "aten.gather.default"
    out = [op_case(op, In((4, 5), dt, lo=0), _idx((4, 3), 5), dim=1) for dt in (F, I, B, D, U8)]
    out += [op_case(op, In((4, 5)), _idx((6, 5), 4), dim=0),
            op_case(op, In((4, 5)), _idx((2, 3), 5), dim=1),  # smaller than self outside dim
            op_case(op, In((2, 3, 4)), _idx((2, 3, 7), 4), dim=-1),
            op_case(op, In((2, 3, 4)), _idx((2, 5, 4), 3), dim=1),
            op_case(op, In((7,)), _idx((9,), 7), dim=0), op_case(op, In(()), _idx((), 1), dim=0),
            op_case(op, In((512, 100)), _idx((512, 1), 100), dim=1),  # the loss's target pick
            op_case(op, In((300, 200)), _idx((300, 200), 300), dim=0),
            viewed("aten.t.default", {}, op, In((5, 4)), _idx((4, 2), 5), dim=1)]
    return out


def _scatters():
    out = []
    op = "aten.scatter.value"
    out += [op_case(op, In((4, 5), dt, lo=0), _perm_idx((4, 5), 1, 1), dim=1, value=v)
            for dt, v in ((F, 2.5), (I, 3), (B, True), (D, -1.0))]
    out += [op_case(op, In((4, 5)), _perm_idx((2, 5), 0, 2)[:, :3].contiguous(), dim=0, value=0.0),
            op_case(op, In((3, 4, 5)), _perm_idx((3, 4, 2), 2, 3), dim=-1, value=1.0),
            op_case(op, In((64, 10)), _idx((64, 1), 10), dim=1, value=1.0),  # one-hot
            op_case(op, In((6,)), _idx((6,), 6), dim=0, value=7),
            viewed("aten.t.default", {}, op, In((5, 4)), _idx((4, 1), 5), dim=1, value=-2.0)]
    op = "aten.scatter.src"
    out += [op_case(op, In((4, 5), dt, lo=0), _perm_idx((4, 5), 1, 4), In((4, 5), dt, lo=0), dim=1)
            for dt in (F, I, B, D)]
    out += [op_case(op, In((5, 4)), _perm_idx((3, 4), 0, 5), In((3, 6)), dim=0),  # src larger than index
            op_case(op, In((2, 6, 3)), _perm_idx((2, 6, 3), 1, 6), In((2, 6, 3)), dim=1),
            op_case(op, In((3, 8)), _perm_idx((3, 8), 1, 7)[:, :2].contiguous(), In((3, 2)), dim=-1)]
    op = "aten.scatter_add.default"
    out += [op_case(op, In((4, 5), dt, lo=0), _idx((4, 7), 5), In((4, 7), dt, lo=0), dim=1)
            for dt in (F, I, D)]
    out += [op_case(op, In((5, 4)), _idx((9, 4), 5), In((9, 4)), dim=0, tol=(1e-5, 1e-5)),
            op_case(op, In((2, 3, 4)), _idx((2, 3, 6), 4), In((2, 3, 8)), dim=2),
            op_case(op, In((10,)), _idx((1000,), 10), In((1000,)), dim=0, tol=(1e-5, 1e-5)),
            op_case(op, In((3, 4)), _idx((2, 2), 3), In((2, 2)), dim=0)]
    op = "aten.index_select.default"
    out += [op_case(op, In((5, 3), dt, lo=0), _idx((4,), 5), dim=0) for dt in (F, I, B, D, U8)]
    out += [op_case(op, In((5, 3)), _idx((7,), 3), dim=1), op_case(op, In((2, 5, 3)), _idx((), 5), dim=1),
            op_case(op, In((2, 5, 3)), _idx((0,), 5), dim=-2), op_case(op, In(()), _idx((1,), 1), dim=0),
            op_case(op, In((1000, 64)), _idx((300,), 1000), dim=0),
            viewed("aten.t.default", {}, op, In((3, 5)), _idx((2,), 3), dim=1)]
    # index_put with one index tensor (embedding backward). Duplicate rows
    # accumulate in index order in both; tol where many rows add up.
    op = "aten.index_put.default"
    out += [op_case(op, In((5, 3), dt, lo=0), [_idx((7,), 5)], In((7, 3), dt, lo=0),
                    accumulate=True) for dt in (F, I, D)]
    uniq = torch.tensor([3, 0, 4, 1])  # no duplicates: accumulate=False is then deterministic
    out += [op_case(op, In((5, 2, 3)), [uniq], In((4, 2, 3)), accumulate=False),
            op_case(op, In((6, 4)), [_idx((2, 3), 6)], In((2, 3, 4)), accumulate=True),
            op_case(op, In((10,)), [_idx((50,), 10)], In((50,)), accumulate=True, tol=(1e-5, 1e-5)),
            op_case(op, In((5, 3)), [In((3,), I, kind="values", values=[-1, 0, -5])], In((3, 3)),
                    accumulate=True),
            op_case(op, In((4, 3)), [_idx((0,), 4)], In((0, 3)), accumulate=True),
            op_case(op, In((1000, 64)), [_idx((3000,), 1000)], In((3000, 64)), accumulate=True,
                    tol=(1e-5, 1e-5))]
    return out


def _negatives():
    bad = In((2, 2), I, kind="values", values=[[0, 7], [1, 2]])
    return [
        neg_case("aten.gather.default", In((3, 4)), bad, dim=1, types=[{"dtype": F, "shape": [2, 2]}],
                 error="index 7 is out of bounds for dimension 1 with size 4"),
        neg_case("aten.gather.default", In((3, 4)), In((3, 4), I32, lo=0, hi=3), dim=1,
                 error="input 1 must be int64, got int32[3, 4]",
                 unsupported="torch 2.x also gathers with int32 indices (1.13 refuses); the "
                             "exporter's graphs index in int64, so the runtime takes int64 only"),
        neg_case("aten.gather.default", In((3, 4)), _idx((3,), 3), dim=0,
                 error="index int64[3] must have the same rank as self float32[3, 4]"),
        neg_case("aten.gather.default", In((3, 4)), _idx((5, 2), 3), dim=1,
                 error="index int64[5, 2] is larger than self float32[3, 4] outside dim 1"),
        neg_case("aten.scatter.value", In((3, 4)), bad, dim=1, value=1.0, types=[{"dtype": F, "shape": [3, 4]}],
                 error="index 7 is out of bounds for dimension 1 with size 4"),
        neg_case("aten.scatter.src", In((3, 4)), _idx((3, 4), 4), In((3, 4), D), dim=1,
                 error="src float64[3, 4] must have self's dtype float32"),
        neg_case("aten.scatter_add.default", In((3, 4)), _idx((3, 4), 4), In((3, 2)), dim=1,
                 error="index int64[3, 4] is larger than src float32[3, 2]"),
        neg_case("aten.index_select.default", In((3, 4)), In((2,), I, kind="values", values=[0, -1]), dim=0,
                 types=[{"dtype": F, "shape": [2, 4]}],
                 error="index -1 is out of bounds for dimension 0 with size 3"),
        neg_case("aten.index_select.default", In((3, 4)), _idx((2, 2), 3), dim=0,
                 error="index must be 0-d or 1-d, got int64[2, 2]"),
        neg_case("aten.index_put.default", In((3, 4)), [In((2,), I, kind="values", values=[0, 3])],
                 In((2, 4)), accumulate=True, types=[{"dtype": F, "shape": [3, 4]}],
                 error="index 3 is out of bounds for dimension 0 with size 3"),
        neg_case("aten.index_put.default", In((3, 4)), [_idx((2,), 3)], In((3, 4)),
                 accumulate=True,
                 error="values float32[3, 4] must be index shape + self's trailing dims "
                       "float32[2, 4]"),
        neg_case("aten.index_put.default", In((3, 4)), [_idx((2,), 3), _idx((2,), 4)], In((2,)),
                 accumulate=True, unsupported="several index tensors (embedding backward "
                                              "needs one)",
                 error="only one index tensor (indexing dim 0) is supported, got 2"),
        neg_case("aten.index_put.default", In((3, 4)), [_idx((2,), 3)], In((4,)),
                 accumulate=True, unsupported="broadcast values (the exporter's graphs give "
                                              "full-shape values)",
                 error="values float32[4] must be index shape + self's trailing dims "
                       "float32[2, 4]"),
    ]


def cases():
    return _gather() + _scatters() + _negatives()
