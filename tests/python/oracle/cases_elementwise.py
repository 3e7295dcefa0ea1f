"""Oracle cases: pointwise ops (src/ops/elementwise_*.cpp): arithmetic,
comparisons, pow, maximum/minimum, where, unary math, clone, _to_copy."""
from .harness import In, Scalar, fused, neg_case, op_case, viewed

F, D, I, I32, U8, B = "float32", "float64", "int64", "int32", "uint8", "bool"

# (shape a, shape b): same shape, broadcasting both ways, 0-d, size-1 dims,
# rank 4, just over the parallel threshold (129 * 257 > 32768), empty.
SHAPES = [((7,), (7,)), ((3, 5), (3, 5)), ((3, 1), (1, 4)), ((5,), (3, 5)),
          ((2, 3, 4), (3, 1)), ((), (4, 3)), ((1,), (6,)), ((), ()),
          ((2, 1, 3, 1), (1, 5, 1, 2)), ((129, 257), (129, 257)), ((257,), (129, 257)),
          ((129, 1), (1, 257)), ((0, 3), (3,))]
FEW = [((3, 5), (3, 5)), ((3, 1), (1, 4)), ((), (4, 3)), ((129, 257), (257,))]

# Mixed dtypes: PyTorch's promotion (category, then dimensioned over 0-d).
MIXED = [(In((3, 4), I), In((3, 4), F)), (In((3, 4), F), In((4,), D)),
         (In((5,), I32, lo=0), In((5,), U8, lo=0)), (In((2, 3), B), In((2, 3), I)),
         (In((4,), U8, lo=0), In((4,), B)), (In((3, 4), F), In((), D)),
         (In((), I), In((2, 3), F)), (In((), I), In((3,), I32))]
SCALARS = [(In((3, 4), F), Scalar(2.5)), (In((3, 4), I), Scalar(2.5)), (In((3, 4), I), Scalar(3)),
           (In((5,), B), Scalar(2)), (Scalar(-1.5), In((2, 3), F)), (In((4,), U8, lo=0), Scalar(3))]


def _arith(op, a_kind="", b_kind="", b_lo=-5, b_hi=6, ints=True, bools=True, mixed=True,
           scalars=True, **attrs):
    out = [op_case(op, In(sa, kind=a_kind), In(sb, kind=b_kind, lo=b_lo, hi=b_hi), **attrs)
           for sa, sb in SHAPES]
    out.append(op_case(op, In((3, 5), kind="special"), In((3, 5), kind="special"), **attrs))
    out.append(op_case(op, In((3, 5), D), In((5,), D), **attrs))
    if ints:
        out += [op_case(op, In(sa, I), In(sb, I, lo=max(b_lo, -5) if b_kind else -5, hi=6), **attrs)
                for sa, sb in FEW]
        out.append(op_case(op, In((6,), I32), In((6,), I32, lo=0 if b_kind else -5), **attrs))
    if bools:
        out += [op_case(op, In(sa, B), In(sb, B), **attrs) for sa, sb in FEW[:3]]
    if mixed:
        out += [op_case(op, a, b, **attrs) for a, b in MIXED + (SCALARS if scalars else [])
                if bools or B not in (getattr(a, "dtype", ""), getattr(b, "dtype", ""))]
    # Strided inputs: torch runs on the view, we on the view op's copy.
    out.append(viewed("aten.t.default", {}, op, In((5, 3)), In((3, 5)), **attrs))
    out.append(viewed("aten.permute.default", {"dims": [1, 2, 0]}, op, In((4, 2, 3)), In((2, 3, 4)),
                      which=0, **attrs))
    out.append(viewed("aten.expand.default", {"size": [3, 4, 5]}, op, In((3, 4, 5)), In((4, 1)),
                      which=1, **attrs))
    out.append(viewed("aten.slice.Tensor", {"dim": 1, "start": 1, "end": 9, "step": 2}, op,
                      In((3, 10)), In((3, 4)), **attrs))
    return out


def _binary():
    out = []
    out += _arith("aten.add.Tensor")
    out += _arith("aten.add.Tensor", alpha=2, bools=False)
    out.append(op_case("aten.add.Tensor", In((3, 5)), In((3, 5)), alpha=0.5))
    out += _arith("aten.sub.Tensor", bools=False)
    out.append(op_case("aten.sub.Tensor", In((3, 5)), In((5,)), alpha=-1.5))
    out += _arith("aten.mul.Tensor")
    out += _arith("aten.div.Tensor")
    # No Scalar overloads: the exporter never passes them a Python number.
    out += _arith("aten.maximum.default", scalars=False)
    out += _arith("aten.minimum.default", scalars=False)
    out += _arith("aten.pow.Tensor_Tensor", a_kind="positive", b_kind="uniform", b_lo=-2, b_hi=3,
                  ints=False, bools=False, mixed=False)
    out += [op_case("aten.pow.Tensor_Tensor", In(s, I, lo=-3, hi=4), In(s, I, lo=0, hi=5))
            for s in ((7,), (3, 4))]
    out.append(op_case("aten.pow.Tensor_Tensor", In((9,), I, lo=-2, hi=3), In((9,), I, lo=-3, hi=0)))
    out.append(op_case("aten.pow.Tensor_Tensor", In((2, 3), I, lo=1, hi=4), In((3,), F)))
    out.append(op_case("aten.pow.Tensor_Tensor", In((2, 3), kind="positive"), Scalar(2)))
    return out


def _scalar_variants():
    out = []
    for op in ("aten.add.Scalar", "aten.sub.Scalar", "aten.mul.Scalar", "aten.div.Scalar"):
        extra = {"alpha": 1} if op in ("aten.add.Scalar", "aten.sub.Scalar") else {}
        out += [op_case(op, In((3, 5)), other=2.5, **extra), op_case(op, In((129, 257)), other=-3, **extra),
                op_case(op, In((4,), I), other=3, **extra), op_case(op, In((4,), I), other=0.5, **extra),
                op_case(op, In((2, 3), kind="special"), other=-0.25, **extra), op_case(op, In(()), other=7, **extra)]
        if "sub" not in op:
            out.append(op_case(op, In((5,), B), other=2, **extra))
    out.append(op_case("aten.add.Scalar", In((3, 5)), other=1.5, alpha=2))
    out.append(op_case("aten.sub.Scalar", In((3, 5), I), other=2, alpha=3))
    for e in (2, 3, 0.5, -0.5, -1, -2, 1, 0, 1.7, -1.3):
        out.append(op_case("aten.pow.Tensor_Scalar", In((3, 7), kind="positive"), exponent=e))
    out += [op_case("aten.pow.Tensor_Scalar", In((129, 257), kind="positive"), exponent=2.5),
            op_case("aten.pow.Tensor_Scalar", In((3, 4), kind="special"), exponent=2),
            op_case("aten.pow.Tensor_Scalar", In((3, 4), kind="special"), exponent=0.5),
            op_case("aten.pow.Tensor_Scalar", In((6,), I, lo=-3, hi=4), exponent=3),
            op_case("aten.pow.Tensor_Scalar", In((6,), I, lo=0, hi=4), exponent=0.5),
            op_case("aten.pow.Tensor_Scalar", In((4,), D, kind="positive"), exponent=1.5),
            op_case("aten.pow.Tensor_Scalar", In(()), exponent=2),
            viewed("aten.t.default", {}, "aten.pow.Tensor_Scalar", In((4, 3), kind="positive"), exponent=3)]
    return out


def _comparisons():
    out = []
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        op = f"aten.{name}.Tensor"
        out += [op_case(op, In(sa, I, lo=-2, hi=3), In(sb, I, lo=-2, hi=3)) for sa, sb in SHAPES]
        out += [op_case(op, In((4, 5), kind="special"), In((4, 5), kind="special")),
                op_case(op, In((3, 4)), In((4,))), op_case(op, In((6,), B), In((6,), B)),
                op_case(op, In((3, 4), I, lo=0, hi=4), In((3, 4), F, kind="values",
                                                          values=[[0.0, 1.0, 2.5, 3.0]] * 3)),
                op_case(op, In((5,), U8, lo=0, hi=3), In((5,), B)),
                op_case(op, In((2, 3)), Scalar(0.0)), op_case(op, In((2, 3), I, lo=0, hi=4), Scalar(2.5)),
                viewed("aten.t.default", {}, op, In((4, 3), I, lo=0, hi=3), In((3, 4), I, lo=0, hi=3))]
        op = f"aten.{name}.Scalar"
        out += [op_case(op, In((3, 5), kind="uniform", lo=-1, hi=1), other=0.0),
                op_case(op, In((3, 5), kind="special"), other=1.0),
                op_case(op, In((129, 257), I, lo=0, hi=4), other=2),
                op_case(op, In((7,), I, lo=0, hi=4), other=2.5),
                op_case(op, In((7,), B), other=1),
                op_case(op, In((), F), other=0.25),
                op_case(op, In((4,), D), other=0.1)]
    return out


def _where():
    op = "aten.where.self"
    out = [op_case(op, In(sc, B), In(sa), In(sb)) for sc, sa, sb in
           [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (4,)), ((), (2, 3), ()), ((5,), (), ()),
            ((129, 257), (129, 257), ()), ((129, 257), (129, 257), (129, 257)),
            ((2, 1, 3), (4, 1), (2, 4, 3)), ((0, 2), (2,), ())]]
    out += [op_case(op, In((3, 4), B), In((3, 4), I), In((3, 4), I)),
            op_case(op, In((3, 4), B), In((3, 4), B), In((4,), B)),
            op_case(op, In((3, 4), B), In((3, 4), I), In((3, 4), F)),
            op_case(op, In((3, 4), B), In((3, 4), F), In((4,), D)),
            op_case(op, In((3, 4), B), In((3, 4), kind="special"), Scalar(0.0)),
            op_case(op, In((3, 4), B), Scalar(1.0), Scalar(0.0)),
            op_case(op, In((3, 4), B), In((3, 4), I), Scalar(-1)),
            op_case(op, In((3, 4), B), In((), D), In((3, 4))),
            viewed("aten.t.default", {}, op, In((4, 3), B), In((3, 4)), In((3, 4))),
            viewed("aten.expand.default", {"size": [3, 4]}, op, In((3, 4), B), In((3, 4)), In((1, 4)),
                   which=2)]
    return out


UNARY_SHAPES = [(7,), (3, 5), (), (129, 257), (2, 1, 3), (0, 4)]


def _unary():
    out = []
    spec = {  # op: (input kind for float cases, lo, hi, int inputs ok, bool inputs ok)
        "neg": ("normal", 0, 0, True, False), "exp": ("uniform", -10, 10, True, True),
        "expm1": ("uniform", -3, 3, True, True), "log": ("positive", 0, 0, True, True),
        "log1p": ("uniform", -0.99, 5, True, True),
        "sqrt": ("positive", 0, 0, True, True), "rsqrt": ("positive", 0, 0, True, True),
        "abs": ("normal", 0, 0, True, False), "relu": ("normal", 0, 0, True, False),
        "sigmoid": ("uniform", -20, 20, True, True), "tanh": ("uniform", -6, 6, True, True),
        "cos": ("uniform", -3, 3, True, True), "sin": ("uniform", -3, 3, True, True),
        "reciprocal": ("normal", 0, 0, True, True), "sign": ("normal", 0, 0, True, True),
        "erf": ("uniform", -4, 4, True, True), "gelu": ("uniform", -6, 6, False, False)}
    for name, (kind, lo, hi, ints, bools) in spec.items():
        op = f"aten.{name}.default"
        out += [op_case(op, In(s, kind=kind, lo=lo, hi=hi)) for s in UNARY_SHAPES]
        out += [op_case(op, In((4, 6), kind="special")), op_case(op, In((3, 5), D, kind=kind, lo=lo, hi=hi))]
        if name in ("expm1", "log1p"):
            out.append(op_case(op, In((50,), kind="uniform", lo=-1e-5, hi=1e-5)))
        if ints:
            out += [op_case(op, In((3, 4), I, lo=1 if kind == "positive" else -5)),
                    op_case(op, In((5,), I32, lo=1 if kind == "positive" else -5))]
        if bools:
            out.append(op_case(op, In((2, 5), B)))
        if name in ("abs", "sign"):
            out.append(op_case(op, In((6,), U8, lo=0, hi=200)))
        out += [viewed("aten.t.default", {}, op, In((5, 3), kind=kind, lo=lo, hi=hi)),
                viewed("aten.permute.default", {"dims": [1, 2, 0]}, op, In((3, 4, 5), kind=kind, lo=lo, hi=hi)),
                viewed("aten.slice.Tensor", {"dim": 0, "start": 1, "end": 100, "step": 3}, op,
                       In((10, 2), kind=kind, lo=lo, hi=hi)),
                viewed("aten.expand.default", {"size": [4, 3]}, op, In((1, 3), kind=kind, lo=lo, hi=hi))]
    return out


def _gelu_masked_fill():
    out = []
    op = "aten.gelu.default"
    out += [op_case(op, In(s, kind="uniform", lo=-6, hi=6), approximate="tanh") for s in UNARY_SHAPES]
    out += [op_case(op, In((4, 6), kind="special"), approximate="tanh"),
            op_case(op, In((3, 5), D), approximate="tanh"),
            fused(op, In((1100,), kind="special")), fused(op, In((3, 5)), approximate="tanh")]
    op = "aten.masked_fill.Scalar"
    for dt, v in ((F, -2.5), (F, "-inf"), (D, 1.5), (I, -7), (B, True), (U8, 3), (I32, 2)):
        out += [op_case(op, In((3, 4), dt, lo=0), In((3, 4), B), value=v),
                op_case(op, In((2, 3, 4, 4), dt, lo=0), In((4, 4), B), value=v)]
    out += [op_case(op, In((3, 1)), In((3, 5), B), value=0.0),  # self broadcast by the mask
            op_case(op, In((129, 257)), In((257,), B), value=1.0),
            op_case(op, In((5,)), In((), B), value=2.0),
            op_case(op, In((4, 6), kind="special"), In((4, 6), B), value="nan"),
            op_case(op, In((3, 4), I), In((3, 4), B), value=2),
            viewed("aten.t.default", {}, op, In((4, 3)), In((3, 4), B), value=-1.0),
            fused(op, In((1100,), kind="special"), In((1100,), B), value="-inf"),
            fused(op, In((3, 5)), In((3, 5), B), value=0.5)]
    return out


def _copies():
    out = []
    op = "aten.clone.default"
    for dt in (F, I, B, D, U8):
        out.append(op_case(op, In((3, 5), dt, lo=0)))
    out += [op_case(op, In(())), op_case(op, In((129, 257))), op_case(op, In((0, 3))),
            viewed("aten.permute.default", {"dims": [2, 0, 1]}, op, In((3, 4, 5))),
            viewed("aten.t.default", {}, op, In((4, 5), I))]
    op = "aten._to_copy.default"
    conv = [(F, I, "uniform"), (F, I32, "uniform"), (F, B, "special"), (F, D, "special"), (D, F, "normal"),
            (I, F, "int"), (B, F, "bool"), (I, B, "int"), (B, I, "bool"), (F, U8, "positive"),
            (U8, F, "int"), (I32, I, "int"), (F, F, "normal")]
    for src, dst, kind in conv:
        out.append(op_case(op, In((3, 5), src, kind=kind, lo=0 if src == U8 else -50, hi=50), dtype=dst))
    out += [op_case(op, In((4,)), dtype=None), op_case(op, In((129, 257)), dtype=D),
            op_case(op, In(()), dtype=I),
            viewed("aten.t.default", {}, op, In((5, 3)), dtype=D)]
    return out


def _clamp():
    op = "aten.clamp.default"
    out = []
    for lo, hi in ((-1.5, 2), (0.25, None), (None, -0.5), (2, 1), (0, 0)):
        out += [op_case(op, In(s), min=lo, max=hi) for s in ((3, 5), (), (129, 257), (0, 4))]
        out += [op_case(op, In((4, 6), kind="special"), min=lo, max=hi),
                op_case(op, In((3, 5), D), min=lo, max=hi),
                fused(op, In((1100,), kind="special"), min=lo, max=hi),
                fused(op, In((3, 5), kind="uniform", lo=-3, hi=3), min=lo, max=hi)]
    out += [op_case(op, In((3, 4), I, lo=-9, hi=9), min=-2, max=5),   # int64 stays
            op_case(op, In((3, 4), I, lo=-9, hi=9), min=0.5),          # float bound: float32
            op_case(op, In((5,), I32, lo=-9, hi=9), min=-3, max=3),
            op_case(op, In((6,), U8, lo=0, hi=200), max=100),
            op_case(op, In((2, 5), B), min=0, max=0),                   # bool with int bounds: int64
            op_case(op, In((3, 5)), min="-inf", max="inf"),
            viewed("aten.t.default", {}, op, In((5, 3)), min=-0.5, max=0.5),
            viewed("aten.expand.default", {"size": [4, 3]}, op, In((1, 3)), min=0)]
    return out


def _tile_forms():
    """Each pointwise op inside a fused group (opt mode), where its float32
    tile form runs: same-shape and one-element operands, wrapped scalars,
    bool operands, NaN/inf."""
    out = []
    s, big = (3, 5), (1100,)  # one tile and more than one (1024 floats)
    for name in ("add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "maximum.default",
                 "minimum.default", "pow.Tensor_Tensor"):
        op = f"aten.{name}"
        a_kind = "positive" if "pow" in name else "special"
        out += [fused(op, In(s, kind=a_kind), In(s)), fused(op, In(big, kind=a_kind), In(())),
                fused(op, In((1,), kind=a_kind), In(big, kind="uniform", lo=-2, hi=2))]
        if "sub" not in name:
            out.append(fused(op, In(s, kind=a_kind), In(s, B)))
        if "maximum" not in name and "minimum" not in name:
            out.append(fused(op, In(s, kind=a_kind), Scalar(1.5)))
    out += [fused("aten.add.Tensor", In(s), In(s), alpha=-0.5), fused("aten.sub.Tensor", In(s), In(s), alpha=2)]
    for name in ("add", "sub", "mul", "div"):
        extra = {"alpha": 2} if name in ("add", "sub") else {}
        out.append(fused(f"aten.{name}.Scalar", In(big, kind="special"), other=0.75, **extra))
    for e in (2, 3, 0.5, -0.5, -1, -2, 1, 1.7):
        out.append(fused("aten.pow.Tensor_Scalar", In(s, kind="positive"), exponent=e))
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        out += [fused(f"aten.{name}.Tensor", In(big, kind="int", lo=0, hi=3, dtype=F),
                      In(big, kind="int", lo=0, hi=3, dtype=F), bool_out=True),
                fused(f"aten.{name}.Tensor", In(s, kind="special"), In(()), bool_out=True),
                fused(f"aten.{name}.Tensor", In(s, B), In(s, B), bool_out=True),
                fused(f"aten.{name}.Scalar", In(s, kind="special"), other=0.0, bool_out=True),
                fused(f"aten.{name}.Scalar", In(s, B), other=True, bool_out=True)]
    out += [fused("aten.where.self", In(big, B), In(big, kind="special"), In(big)),
            fused("aten.where.self", In(s, B), In(()), In(s)),
            fused("aten.where.self", In(s, B), In(s), Scalar(0.0))]
    for name in ("neg", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "abs", "relu", "sigmoid", "tanh",
                 "cos", "sin", "reciprocal", "sign", "erf"):
        out += [fused(f"aten.{name}.default", In(big, kind="special")),
                fused(f"aten.{name}.default", In(s, kind="uniform", lo=-3, hi=3))]
        if name not in ("neg", "relu", "abs", "sign"):
            out.append(fused(f"aten.{name}.default", In(s, B)))  # bool in, float32 out
    out += [fused("aten.clone.default", In(big, kind="special")),
            fused("aten.clone.default", In(s, B), bool_out=True),
            fused("aten._to_copy.default", In(s, kind="special"), dtype=B, bool_out=True),
            fused("aten._to_copy.default", In(s, B), dtype=F)]
    return out


def _seq_negatives():
    return [
        neg_case("aten.gelu.default", In((3,)), approximate="fast",
                 error="approximate must be 'none' or 'tanh', got 'fast'"),
        neg_case("aten.masked_fill.Scalar", In((3,)), In((3,)), value=0.0,
                 error="input 1 must be bool, got float32[3]"),
        neg_case("aten.masked_fill.Scalar", In((3,)), In((4,), B), value=0.0,
                 error="shapes cannot be broadcast together: [3] [4]"),
    ]


def _negatives():
    bcast = [neg_case(f"aten.{n}", In((3,)), In((4,)), error="shapes cannot be broadcast together: [3] [4]")
             for n in ("sub.Tensor", "div.Tensor", "maximum.default", "minimum.default", "pow.Tensor_Tensor",
                       "ne.Tensor", "lt.Tensor", "le.Tensor", "gt.Tensor", "ge.Tensor")]
    scalar = [neg_case(f"aten.{n}.Scalar", In((3,)), other="x", error="attribute 'other' must be a number",
                       **({"alpha": 1} if n in ("add", "sub") else {}))
              for n in ("add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge")]
    return bcast + scalar + [
        neg_case("aten.add.Tensor", In((3,)), In((4,)),
                 error="shapes cannot be broadcast together: [3] [4]"),
        neg_case("aten.mul.Tensor", In((2, 3)), In((3, 2)),
                 error="shapes cannot be broadcast together: [2, 3] [3, 2]"),
        neg_case("aten.sub.Tensor", In((3,), B), In((3,), B),
                 error="subtraction of bool tensors is not supported; use logical_xor"),
        neg_case("aten.pow.Tensor_Tensor", In((3,), B), In((3,), B),
                 error="pow is not supported for bool tensors"),
        neg_case("aten.pow.Tensor_Scalar", In((3,), I), exponent=-2,
                 error="integers to negative integer powers are not allowed"),
        neg_case("aten.add.Tensor", In((3,), I), In((3,), I), alpha=2.5,
                 error="for integral input tensors, alpha must not be a floating point number, got 2.5"),
        neg_case("aten.neg.default", In((3,), B), error="not supported for bool tensors"),
        neg_case("aten.relu.default", In((3,), B), error="not supported for bool tensors"),
        neg_case("aten.where.self", In((3,)), In((3,)), In((3,)),
                 error="input 0 must be bool, got float32[3]"),
        neg_case("aten.where.self", In((3,), B), In((2,)), In((3,)),
                 error="shapes cannot be broadcast together: [3] [2] [3]"),
        neg_case("aten.eq.Tensor", In((2, 4)), In((3, 4)),
                 error="shapes cannot be broadcast together: [2, 4] [3, 4]"),
        neg_case("aten.clamp.default", In((3,)), min=None, max=None,
                 types=[{"dtype": F, "shape": [3]}],
                 error="at least one of 'min' or 'max' must be given"),
        neg_case("aten._to_copy.default", In((3,)), dtype="complex64",
                 types=[{"dtype": F, "shape": [3]}], error="unknown dtype 'complex64'",
                 unsupported="no complex dtypes"),
    ]


def cases():
    return (_binary() + _scalar_variants() + _comparisons() + _where() + _unary() + _copies()
            + _tile_forms() + _negatives() + _gelu_masked_fill() + _seq_negatives() + _clamp())
