"""Oracle cases: reductions (src/ops/reduce.cpp): sum, mean, amax, amin,
argmax over dim lists, keepdim, dtype, every layout path."""
from .harness import In, neg_case, op_case, viewed

F, D, I, I32, U8, B = "float32", "float64", "int64", "int32", "uint8", "bool"

# (shape, dims): contiguous rows [O, R], a middle dim [O, R, I], leading
# dims, non-adjacent dims (the general path), negative dims, size-1 dims,
# all dims, a row longer than the parallel split, an empty input.
LAYOUTS = [((3, 5), [1]), ((3, 5), [0]), ((2, 3, 4), [1]), ((2, 3, 4), [0, 2]), ((2, 3, 4, 5), [1, 3]),
           ((2, 3, 4), [-1]), ((4, 1, 3), [1]), ((2, 3, 4), [0, 1, 2]), ((7,), [0]), ((1, 100003), [1]),
           ((257, 129), [0]), ((129, 257), [1]), ((5, 6, 7), [2, 0]), ((0, 3), [0]), ((3, 0), [1])]

# float32 sums: we accumulate in double, torch in float32 cascades.
SUM_TOL = (1e-5, 1e-5)


def _sums():
    out = []
    op = "aten.sum.dim_IntList"
    for shape, dims in LAYOUTS:
        for keep in (False, True):
            out.append(op_case(op, In(shape), dim=dims, keepdim=keep, tol=SUM_TOL))
    out += [op_case(op, In((3, 4)), dim=[], tol=SUM_TOL), op_case(op, In((3, 4)), dim=None, tol=SUM_TOL),
            op_case(op, In(()), dim=[0], tol=SUM_TOL), op_case(op, In(()), dim=[], keepdim=True),
            op_case(op, In((3, 4), I), dim=[1]), op_case(op, In((3, 4), I32), dim=[0]),
            op_case(op, In((3, 4), B), dim=[1], keepdim=True), op_case(op, In((5, 6), U8, lo=0), dim=[0]),
            op_case(op, In((3, 4), D), dim=[1]), op_case(op, In((3, 4)), dim=[1], dtype=D),
            op_case(op, In((3, 4), I), dim=[0], dtype=F), op_case(op, In((3, 4), kind="special"), dim=[1]),
            viewed("aten.t.default", {}, op, In((5, 3)), dim=[1], tol=SUM_TOL),
            viewed("aten.permute.default", {"dims": [2, 0, 1]}, op, In((3, 4, 5)), dim=[0, 2], tol=SUM_TOL),
            viewed("aten.expand.default", {"size": [4, 3, 5]}, op, In((3, 1)), dim=[0, 2], tol=SUM_TOL)]
    op = "aten.sum.default"
    out += [op_case(op, In(s), tol=SUM_TOL) for s in ((7,), (3, 5), (), (129, 257), (0, 4))]
    out += [op_case(op, In((3, 4), I)), op_case(op, In((3, 4), B)), op_case(op, In((3, 4), D)),
            op_case(op, In((3, 4)), dtype=D), op_case(op, In((3, 4), I32)),
            viewed("aten.t.default", {}, op, In((5, 3)), tol=SUM_TOL)]
    return out


def _means():
    out = []
    op = "aten.mean.dim"
    for shape, dims in LAYOUTS:
        out.append(op_case(op, In(shape), dim=dims, keepdim=len(dims) == 1, tol=SUM_TOL))
    out += [op_case(op, In((3, 4)), dim=None, tol=SUM_TOL), op_case(op, In((3, 4), D), dim=[0]),
            op_case(op, In((3, 4)), dim=[1], dtype=D), op_case(op, In((3, 4), I), dim=[1], dtype=F),
            op_case(op, In((3, 4), kind="special"), dim=[0]),
            viewed("aten.permute.default", {"dims": [1, 0]}, op, In((6, 5)), dim=[0], tol=SUM_TOL)]
    op = "aten.mean.default"
    out += [op_case(op, In(s), tol=SUM_TOL) for s in ((7,), (3, 5), (), (129, 257), (0,))]
    out += [op_case(op, In((3, 4), D)), op_case(op, In((3, 4), I), dtype=F), op_case(op, In((3, 4)), dtype=D)]
    return out


def _extrema():
    out = []
    for name in ("amax", "amin"):
        op = f"aten.{name}.default"
        for shape, dims in LAYOUTS[:13]:
            out.append(op_case(op, In(shape), dim=dims, keepdim=len(dims) == 2))
        out += [op_case(op, In((3, 4)), dim=[]), op_case(op, In((4, 5), kind="special"), dim=[1]),
                op_case(op, In((4, 5), kind="special"), dim=[0, 1]),
                op_case(op, In((3, 4), I), dim=[1]), op_case(op, In((3, 4), I32), dim=[0]),
                op_case(op, In((3, 4), B), dim=[1]), op_case(op, In((3, 4), U8, lo=0, hi=255), dim=[0]),
                op_case(op, In((3, 4), D), dim=[1], keepdim=True), op_case(op, In(()), dim=[]),
                viewed("aten.t.default", {}, op, In((4, 6)), dim=[0])]
    op = "aten.argmax.default"
    out += [op_case(op, In(s), dim=d, keepdim=k) for s, d, k in
            [((3, 5), 1, False), ((3, 5), 0, True), ((2, 3, 4), 1, False), ((2, 3, 4), -1, True),
             ((7,), 0, False), ((3, 5), None, False), ((3, 5), None, True), ((), None, False),
             ((), 0, False), ((129, 257), 1, False), ((257, 129), 0, False)]]
    out += [op_case(op, In((6, 8), I, lo=0, hi=3), dim=1),  # ties: the first maximum
            op_case(op, In((6, 8), F, kind="int", lo=0, hi=3), dim=0),
            op_case(op, In((5, 7), kind="special"), dim=1),  # NaN counts as the maximum
            op_case(op, In((4, 5), D), dim=0), op_case(op, In((4, 5), I32), dim=None),
            op_case(op, In((4, 5), U8, lo=0, hi=255), dim=1),
            viewed("aten.t.default", {}, op, In((5, 4)), dim=1)]
    return out


def _negatives():
    return [
        neg_case("aten.sum.dim_IntList", In((3, 4)), dim=[2],
                 error="dim 2 is out of range for a tensor of rank 2"),
        neg_case("aten.sum.dim_IntList", In((3, 4)), dim=[1, -1],
                 error="dim -1 appears more than once"),
        neg_case("aten.mean.dim", In((3, 4), I), dim=[1], error="mean needs a float input or dtype, got int64"),
        neg_case("aten.mean.default", In((3, 4), I), error="mean needs a float input or dtype, got int64"),
        neg_case("aten.amax.default", In((3, 4)), dim=[-3], error="dim -3 is out of range for a tensor of rank 2"),
        neg_case("aten.amin.default", In((3, 4)), dim=[0, 0], error="dim 0 appears more than once"),
        neg_case("aten.argmax.default", In((3, 4), B), dim=1, error="argmax is not supported for bool tensors"),
        neg_case("aten.argmax.default", In((0, 4)), dim=None, error="argmax of an empty tensor"),
        neg_case("aten.sum.default", In((3,)), dtype="complex64", types=[{"dtype": F, "shape": []}],
                 error="unknown dtype 'complex64'", unsupported="no complex dtypes"),
    ]


def cases():
    return _sums() + _means() + _extrema() + _negatives()
