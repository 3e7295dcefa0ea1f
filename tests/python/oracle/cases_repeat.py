"""Oracle cases: repeat, flip and cumsum (src/ops/repeat.cpp), over every
dtype; cumsum also over its dtype argument and long lines (summed in
order, float32 in double, so the results match torch's exactly)."""
from .harness import In, neg_case, op_case, viewed

F, D, I, I32, U8, B = "float32", "float64", "int64", "int32", "uint8", "bool"
DTYPES = (F, D, I, I32, U8, B)


def _repeat():
    op = "aten.repeat.default"
    out = [op_case(op, In((2, 3), dt), repeats=[2, 3]) for dt in DTYPES]
    out += [op_case(op, In((2, 3)), repeats=[2, 1, 2]), op_case(op, In((2, 3), I), repeats=[3, 1, 1, 1]),
            op_case(op, In(()), repeats=[]), op_case(op, In(()), repeats=[3]), op_case(op, In((), B), repeats=[2, 2]),
            op_case(op, In((2, 3)), repeats=[2, 0]), op_case(op, In((0, 3)), repeats=[2, 2]),
            op_case(op, In((3, 1)), repeats=[1, 5]), op_case(op, In((1,)), repeats=[7]),
            op_case(op, In((5, 4, 3)), repeats=[2, 3, 1, 2]), op_case(op, In((2, 3)), repeats=[1, 1]),
            op_case(op, In((129, 257)), repeats=[1, 2]), op_case(op, In((33, 1, 65)), repeats=[2, 40, 1]),
            viewed("aten.t.default", {}, op, In((3, 4)), repeats=[2, 1])]
    return out


def _flip():
    op = "aten.flip.default"
    out = [op_case(op, In((3, 4), dt), dims=[0]) for dt in DTYPES]
    out += [op_case(op, In((3, 4), dt), dims=[1]) for dt in DTYPES]
    out += [op_case(op, In((2, 3, 4)), dims=[0, 2]), op_case(op, In((2, 3, 4)), dims=[-1]),
            op_case(op, In((2, 3, 4)), dims=[0, 1, 2]), op_case(op, In((2, 3, 4)), dims=[1, 2]),
            op_case(op, In((2, 3, 4, 5), I), dims=[0, 1]), op_case(op, In((2, 3, 4)), dims=[]),
            op_case(op, In(()), dims=[0]), op_case(op, In(()), dims=[-1]),
            op_case(op, In((1, 5, 1)), dims=[0, 1]), op_case(op, In((0, 3)), dims=[0]),
            op_case(op, In((4, 1, 3, 5)), dims=[1, 3]), op_case(op, In((4, 1, 3, 5)), dims=[2, -4]),
            op_case(op, In((129, 257)), dims=[1]), op_case(op, In((129, 257)), dims=[0]),
            op_case(op, In((7,), kind="special"), dims=[0]),
            viewed("aten.permute.default", {"dims": [2, 0, 1]}, op, In((2, 3, 4)), dims=[0, 2])]
    return out


def _cumsum():
    op = "aten.cumsum.default"
    out = [op_case(op, In((5, 7), dt), dim=d) for dt in DTYPES for d in (0, 1)]
    out += [op_case(op, In((2, 3, 4)), dim=-1), op_case(op, In((2, 3, 4), D), dim=-2),
            op_case(op, In(()), dim=0), op_case(op, In((), I), dim=-1),
            op_case(op, In((0, 3)), dim=0), op_case(op, In((3, 0)), dim=1), op_case(op, In((3, 0)), dim=0),
            op_case(op, In((5, 7)), dim=1, dtype=D), op_case(op, In((5, 7), D), dim=1, dtype=F),
            op_case(op, In((5, 7), I), dim=0, dtype=F), op_case(op, In((5, 7), B), dim=1, dtype=D),
            op_case(op, In((5, 7), kind="uniform"), dim=1, dtype=I),
            op_case(op, In((5, 7), I32), dim=1, dtype=I),
            op_case(op, In((3000,)), dim=0), op_case(op, In((100000,)), dim=0),
            op_case(op, In((129, 257)), dim=0), op_case(op, In((129, 257)), dim=1),
            op_case(op, In((3, 130, 5)), dim=1), op_case(op, In((2, 5, 100)), dim=1),
            op_case(op, In((3, 300, 130)), dim=1), op_case(op, In((6, 8), kind="special"), dim=1),
            op_case(op, In((40, 40), I, lo=-2 ** 62, hi=2 ** 62), dim=1),  # int64 wraps around
            viewed("aten.t.default", {}, op, In((4, 6)), dim=1)]
    return out


def _negatives():
    return [
        neg_case("aten.repeat.default", In((2, 3)), repeats=[2],
                 error="repeats [2] has fewer entries than float32[2, 3] has dims"),
        neg_case("aten.repeat.default", In((2, 3)), repeats=[2, -1], error="repeats [2, -1] holds a negative count"),
        neg_case("aten.flip.default", In((2, 3)), dims=[0, -2], error="dim 0 appears multiple times in the list of dims"),
        neg_case("aten.flip.default", In(()), dims=[0, -1], error="dim 0 appears multiple times in the list of dims"),
        neg_case("aten.flip.default", In((2, 3)), dims=[2], error="dim 2 is out of range for a tensor of rank 2"),
        neg_case("aten.cumsum.default", In((2, 3)), dim=2, error="dim 2 is out of range for a tensor of rank 2"),
        neg_case("aten.cumsum.default", In(()), dim=1, error="dim 1 is out of range for a tensor of rank 0"),
        neg_case("aten.cumsum.default", In((2, 3), I32), dim=0, dtype=I32,
                 error="cumsum to int32 is not supported (float32, float64, bfloat16 or int64)",
                 unsupported="int32 cumsum results"),
    ]


def cases():
    return _repeat() + _flip() + _cumsum() + _negatives()
