"""Oracle cases: bfloat16 (DType::BF16): casts with torch's rounding (every
cast to bfloat16 goes through float32 and rounds to nearest even), and the
ops that compute bfloat16 in float32 and round once (src/ops/bf16_kernel.cpp).

Comparison (README.md, "bfloat16"): bitwise by default, for casts and for
ops whose float32 result is exact or correctly rounded; `ulp=1` where
torch's float32 result may itself differ by a few float32 ulps
(transcendentals) so a near-tie rounds the other way; `ulp_scale=k` (ulps of
the output's largest magnitude) where the summation order differs
(reductions, softmax, matmul, conv, norms)."""
import torch

from .harness import Case, In, Node, Program, Scalar, op_case, viewed

# Cases here are named "<op>#bf16.<k>": numbered apart from the other
# files' cases, whose names (and so seeds) stay as they were.
CASE_TAG = "bf16."
BF, F, D, I, I32, B = "bfloat16", "float32", "float64", "int64", "int32", "bool"
# torch 1.13's bfloat16 tanh-GELU and layer norm round between their steps;
# 2.x computes them in float32 and rounds once, as ours does. Under 1.13 their
# reference is that: the float32 op on the upcast inputs, rounded once.
TORCH_1 = torch.__version__.startswith("1.")


def _round_once(fn):
    """fn on float32 copies of the bfloat16 inputs, its outputs rounded to
    bfloat16 (torch 1.x only; None, the eager op, on 2.x)."""
    if not TORCH_1:
        return None

    def ref(*ins):
        out = fn(*[x.float() if isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16 else x
                   for x in ins])
        outs = out if isinstance(out, (tuple, list)) else [out]
        return [o.to(torch.bfloat16) for o in outs]
    return ref
CAST = "aten._to_copy.default"

SHAPES = [((7,), (7,)), ((3, 5), (3, 5)), ((3, 1), (1, 4)), ((5,), (3, 5)), ((), (4, 3)),
          ((2, 1, 3, 1), (1, 5, 1, 2)), ((129, 257), (257,)), ((0, 3), (3,))]


def _f32_bits(bits):
    """A float32 tensor with exactly these bit patterns."""
    return torch.tensor([b - (1 << 32) if b >= 1 << 31 else b for b in bits],
                        dtype=torch.int32).view(torch.float32)


# float32 -> bfloat16 rounding: ties (low half exactly 0x8000) to the even
# neighbour, both ways, at several exponents and signs; one float32 ulp either
# side of a tie; subnormals (ties between 0 and the least subnormal, too);
# values that round up to inf; NaN, +-inf, +-0.
TIE_BITS = [
    0x3F808000,  # 1 + 2^-8: between 1.0 (even) and 1 + 2^-7 -> 1.0
    0x3F818000,  # 1 + 3 * 2^-8: between 1 + 2^-7 (odd) and 1 + 2^-6 -> up
    0xBF808000, 0xBF818000,  # the same, negative
    0x3F807FFF, 0x3F808001, 0x3F817FFF, 0x3F818001,  # just below / above the ties
    0x71FF8000, 0x71FE8000, 0x0C808000, 0x0C818000,  # ties at large and small exponents
    0x3FFF8000,  # 2 - 2^-8: odd 0x3FFF -> rounds up into the next binade (2.0)
    0x00008000, 0x00018000, 0x80008000, 0x80018000,  # subnormal ties: -> 0 / -> 2 steps
    0x00000001, 0x00007FFF, 0x00008001, 0x007FFFFF, 0x00400000,  # subnormals
    0x7F7FFFFF,  # float32 max -> inf
    0x7F7F8000,  # tie between bfloat16 max (odd 0x7F7F) and inf -> inf
    0x7F7F7FFF,  # just under that tie -> bfloat16 max
    0xFF7FFFFF, 0xFF7F8000,  # the same, negative -> -inf
    0x7F800000, 0xFF800000, 0x00000000, 0x80000000,  # +-inf, +-0
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF,  # NaNs, quiet and signalling
]

# float64 -> bfloat16 goes through float32 (two roundings): 1 + 2^-8 + 2^-30
# rounds to float32 1 + 2^-8, a tie, then to 1.0; rounded once it would be
# 1 + 2^-7.
F64_VALUES = [1 + 2 ** -8 + 2 ** -30, 1 + 2 ** -8 + 2 ** -20, 1 + 3 * 2 ** -8 - 2 ** -40,
              -(1 + 2 ** -8 + 2 ** -30), 3.0e38, 3.4e38, 1e300, -1e300, 1e-300, 2 ** -140,
              float("nan"), float("inf"), -0.0, 0.1, 1 / 3]

# int64 -> bfloat16: 257 is a tie (256 / 258) -> 256; 259 -> 260; 2^24 + 1 is
# not a float32, so it rounds twice; large and negative values.
I64_VALUES = [0, 1, -1, 255, 256, 257, 259, -257, -259, 2 ** 24 + 1, 2 ** 24 + 3, 2 ** 40 + 2 ** 32 + 1,
              -(2 ** 62), 2 ** 63 - 1, 12345, -98765]


def _casts():
    out = []
    ties = _f32_bits(TIE_BITS)
    out.append(op_case(CAST, ties, dtype=BF))
    for s in ((7,), (3, 5), (), (129, 257), (0, 4)):
        out.append(op_case(CAST, In(s), dtype=BF))
    out += [op_case(CAST, In((4, 6), kind="special"), dtype=BF),
            op_case(CAST, In((5, 7), kind="uniform", lo=-1e-38, hi=1e-38), dtype=BF),  # subnormal range
            op_case(CAST, In((5, 7), kind="uniform", lo=-3.4e38, hi=3.4e38), dtype=BF),  # some overflow
            viewed("aten.t.default", {}, CAST, In((5, 3)), dtype=BF),
            # bfloat16 -> float32 / float64 / int64 / int32 / bool, exact (ints truncate)
            op_case(CAST, In((3, 5), BF, kind="special"), dtype=F),
            op_case(CAST, In((129, 257), BF), dtype=F),
            op_case(CAST, In((3, 5), BF, kind="special"), dtype=D),
            op_case(CAST, In((4, 6), BF, kind="uniform", lo=-300, hi=300), dtype=I),
            op_case(CAST, In((4, 6), BF, kind="uniform", lo=-300, hi=300), dtype=I32),
            op_case(CAST, In((4, 6), BF, kind="special"), dtype=B),
            op_case(CAST, In((2, 3), BF, kind="values", values=[[0.0, -0.0, 1e-40], [2.0, -0.5, 0.0]]), dtype=B),
            op_case(CAST, _f32_bits(TIE_BITS).to(torch.bfloat16), dtype=F),
            # float64 -> bfloat16 through float32
            op_case(CAST, torch.tensor(F64_VALUES, dtype=torch.float64), dtype=BF),
            op_case(CAST, In((6, 9), D), dtype=BF),
            op_case(CAST, In((4, 5), D, kind="special"), dtype=BF),
            # ints and bools -> bfloat16
            op_case(CAST, torch.tensor(I64_VALUES, dtype=torch.int64), dtype=BF),
            op_case(CAST, In((5, 6), I, lo=-1000, hi=1000), dtype=BF),
            op_case(CAST, In((5, 6), I32, lo=-100000, hi=100000), dtype=BF),
            op_case(CAST, In((3, 4), B), dtype=BF),
            op_case(CAST, In((3, 4), BF)),  # dtype None keeps bfloat16
            op_case("aten.clone.default", In((3, 4), BF, kind="special")),
            op_case("aten.clone.default", In((129, 257), BF))]
    return out


# Python numbers stored into bfloat16 (fills, pad and scatter values, masked
# fill, wrapped constants): double -> float32 -> bfloat16, ties to even.
TIE_UP = 1 + 3 * 2 ** -8      # between 1 + 2^-7 (odd) and 1 + 2^-6 -> up
TIE_DOWN = -(1 + 2 ** -8)     # between -1 (even) and -(1 + 2^-7) -> -1
TWICE = 1 + 2 ** -8 + 2 ** -30  # float32 rounds it to a tie -> 1.0


def _scalars():
    out = []
    # (3.4e38, past bfloat16's range, torch refuses: "cannot be converted")
    for v in (TIE_UP, TIE_DOWN, TWICE, 0.1, 3.0e38):
        out += [op_case("aten.full.default", size=[2, 3], fill_value=v, dtype=BF),
                op_case("aten.masked_fill.Scalar", In((2, 3), BF), In((2, 3), B), value=v)]
    out += [op_case("aten.scalar_tensor.default", s=TIE_UP, dtype=BF),
            op_case("aten.full_like.default", In((2, 3), BF), fill_value=TIE_DOWN, dtype=None),
            op_case("aten.new_full.default", In((2,), BF), size=[3], fill_value=TIE_UP, dtype=None),
            op_case("aten.constant_pad_nd.default", In((3, 4), BF), pad=[1, 2, 0, 1], value=TIE_UP),
            op_case("aten.scatter.value", In((4, 5), BF), torch.tensor([[0, 1, 2, 3, 4]] * 2), dim=1,
                    value=TIE_DOWN),
            # 1.13 rounds the number to bfloat16 first, 2.x (and ours) does not: 1 ulp
            op_case("aten.mul.Tensor", In((3, 4), BF), Scalar(TIE_UP), ulp=1),
            op_case("aten.add.Tensor", In((3, 4), BF, kind="values", values=[0.0] * 12), Scalar(TIE_UP))]
    return out


def _binary():
    out = []
    for op in ("aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor",
               "aten.maximum.default", "aten.minimum.default"):
        out += [op_case(op, In(sa, BF), In(sb, BF)) for sa, sb in SHAPES]
        out.append(op_case(op, In((4, 6), BF, kind="special"), In((4, 6), BF, kind="special")))
        # Promotion: a float32 / float64 0-d tensor keeps bfloat16, a
        # dimensioned float32 wins, ints and bools take bfloat16. The 0-d
        # values are bfloat16-exact: torch rounds a 0-d operand to bfloat16
        # first or not depending on its version and the operand's position
        # (2.x's mul/div keep a second operand's float32 value; 1.13 rounds).
        out += [op_case(op, In((3, 4), BF), In((), F, kind="values", values=0.375)),
                op_case(op, In((), F, kind="values", values=-1.25), In((3, 4), BF)),
                op_case(op, In((3, 4), BF), In((), D, kind="values", values=2.75)),
                op_case(op, In((3, 4), BF), In((4,), F)),
                op_case(op, In((3, 4), I, lo=1, hi=9), In((), BF)), op_case(op, In((3, 4), BF), In((3, 4), I, lo=1, hi=9)),
                op_case(op, In((3, 4), BF), In((3, 4), B)) if op not in ("aten.sub.Tensor", "aten.div.Tensor")
                else op_case(op, In((3, 4), BF), In((3, 4), I32, lo=1, hi=9)),
                viewed("aten.t.default", {}, op, In((5, 3), BF), In((3, 5), BF))]
        if op in ("aten.mul.Tensor", "aten.div.Tensor"):
            # A 0-d float32 that is no bfloat16 (see above): ours computes
            # with its float32 value, as torch 2.x does for a second operand;
            # rounding it first moves a product by at most 1 ulp.
            out += [op_case(op, In((3, 4), BF), In((), F), ulp=1),
                    op_case(op, In((), F), In((3, 4), BF), ulp=1)]
        if op not in ("aten.maximum.default", "aten.minimum.default"):  # no Scalar overloads
            out += [op_case(op, In((3, 4), BF), Scalar(2.5)), op_case(op, In((3, 4), BF), Scalar(3)),
                    op_case(op, Scalar(-1.5), In((2, 3), BF))]
    out += [op_case("aten.add.Tensor", In((3, 5), BF), In((3, 5), BF), alpha=2),
            op_case("aten.sub.Tensor", In((3, 5), BF), In((5,), BF), alpha=-1)]
    for op in ("aten.add.Scalar", "aten.sub.Scalar", "aten.mul.Scalar", "aten.div.Scalar"):
        extra = {"alpha": 1} if op in ("aten.add.Scalar", "aten.sub.Scalar") else {}
        out += [op_case(op, In((3, 5), BF), other=2.5, **extra),
                op_case(op, In((129, 257), BF), other=-3, **extra),
                op_case(op, In((2, 3), BF, kind="special"), other=-0.25, **extra)]
    # pow: float32 powf is not correctly rounded, in torch either.
    out += [op_case("aten.pow.Tensor_Tensor", In((3, 5), BF, kind="positive"),
                    In((3, 5), BF, kind="uniform", lo=-2, hi=3), ulp=1),
            op_case("aten.pow.Tensor_Scalar", In((3, 5), BF, kind="positive"), exponent=2, ulp=1),
            op_case("aten.pow.Tensor_Scalar", In((3, 5), BF, kind="positive"), exponent=0.5, ulp=1)]
    return out


def _compare():
    out = []
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        # small ints: equal values are common
        out += [op_case(f"aten.{name}.Tensor", In((3, 5), BF, kind="int", lo=-3, hi=3),
                        In((3, 5), BF, kind="int", lo=-3, hi=3)),
                op_case(f"aten.{name}.Tensor", In((4, 6), BF, kind="special"), In((6,), BF, kind="special")),
                op_case(f"aten.{name}.Tensor", In((3, 5), BF, kind="int", lo=-3, hi=3), In((), F, kind="int", lo=-3, hi=3)),
                # bfloat16 vs a dimensioned float32: compared in float32, so
                # 0.1f != bfloat16(0.1)
                op_case(f"aten.{name}.Tensor", In((4,), BF, kind="values", values=[0.1, 1.0, 2.5, -3.0]),
                        In((4,), F, kind="values", values=[0.1, 1.0, 2.5, -3.0])),
                op_case(f"aten.{name}.Scalar", In((3, 5), BF, kind="int", lo=-3, hi=3), other=1),
                op_case(f"aten.{name}.Scalar", In((3, 5), BF, kind="special"), other=0.5)]
    return out


UNARY_EXACT = ["aten.neg.default", "aten.abs.default", "aten.relu.default", "aten.sign.default",
               "aten.sqrt.default", "aten.reciprocal.default"]
UNARY_ULP = ["aten.exp.default", "aten.log.default", "aten.tanh.default", "aten.sigmoid.default",
             "aten.erf.default", "aten.expm1.default", "aten.log1p.default", "aten.sin.default",
             "aten.cos.default", "aten.rsqrt.default"]


def _unary():
    out = []
    for op in UNARY_EXACT + UNARY_ULP:
        u = 1 if op in UNARY_ULP else 0
        # torch's vectorised float32 erf is accurate to ~1e-7 absolute, not
        # relative: near 0 its bfloat16 result is several ulps off.
        t = (0, 1e-6) if op == "aten.erf.default" else None
        pos = op in ("aten.log.default", "aten.sqrt.default", "aten.rsqrt.default", "aten.log1p.default")
        kind = "positive" if pos else "normal"
        out += [op_case(op, In(s, BF, kind=kind), ulp=u, tol=t) for s in ((7,), (3, 5), (), (129, 257), (0, 3))]
        out.append(op_case(op, In((4, 6), BF, kind="special"), ulp=u, tol=t))
    for approx in ("none", "tanh"):
        # (gelu "none" is x * erf(...): the same absolute error near 0)
        ref = _round_once(lambda x, a=approx: torch.ops.aten.gelu.default(x, approximate=a))
        out += [op_case("aten.gelu.default", In(s, BF), approximate=approx, ulp=1, tol=(0, 1e-6), ref=ref)
                for s in ((3, 5), (129, 257))]
        out.append(op_case("aten.gelu.default", In((4, 6), BF, kind="special"), approximate=approx, ulp=1,
                           tol=(0, 1e-6), ref=ref))
    out += [op_case("aten.clamp.default", In((3, 5), BF), min=-0.5, max=0.7),
            op_case("aten.clamp.default", In((4, 6), BF, kind="special"), min=-1.1, max=None)]
    return out


def _select():
    out = []
    for sc, sa, sb in (((3, 5), (3, 5), (3, 5)), ((3, 1), (1, 4), ()), ((129, 257), (257,), (129, 257))):
        out.append(op_case("aten.where.self", In(sc, B), In(sa, BF), In(sb, BF)))
    out += [op_case("aten.where.self", In((3, 4), B), In((3, 4), BF, kind="special"), In((), F)),
            op_case("aten.where.self", In((3, 4), B), In((3, 4), BF), In((3, 4), F)),  # -> float32
            op_case("aten.masked_fill.Scalar", In((3, 5), BF), In((3, 5), B), value=0.1),  # 0.1 rounded
            op_case("aten.masked_fill.Scalar", In((3, 5), BF), In((5,), B), value="-inf"),
            op_case("aten.masked_fill.Scalar", In((129, 257), BF), In((129, 257), B), value=3.0e38)]
    return out


def _reductions():
    """torch sums bfloat16 in float32 and rounds once; we sum the float32
    twin in double: 1 ulp apart where the float32 sums straddle a tie."""
    out = []
    for shape, dims in (((3, 5), [1]), ((3, 5), [0]), ((2, 3, 4), [0, 2]), ((7,), [0]), ((1, 4099), [1]),
                        ((129, 257), [0]), ((0, 3), [1])):
        out += [op_case("aten.sum.dim_IntList", In(shape, BF), dim=dims, keepdim=False, ulp=1),
                op_case("aten.mean.dim", In(shape, BF), dim=dims, keepdim=True, ulp=1),
                op_case("aten.amax.default", In(shape, BF), dim=dims, keepdim=False),
                op_case("aten.amin.default", In(shape, BF), dim=dims, keepdim=True)]
    out.append(op_case("aten.sum.dim_IntList", In((0, 3), BF), dim=[0]))  # empty sum: 0
    out += [op_case("aten.sum.default", In((129, 257), BF), ulp=1),
            op_case("aten.mean.default", In((5, 6), BF), ulp=1),
            op_case("aten.sum.dim_IntList", In((3, 4), BF), dim=[1], dtype=F, tol=(1e-5, 1e-5)),
            op_case("aten.amax.default", In((4, 6), BF, kind="special"), dim=[1]),
            op_case("aten.argmax.default", In((4, 6), BF, kind="int", lo=-3, hi=3), dim=1),
            viewed("aten.permute.default", {"dims": [2, 0, 1]}, "aten.sum.dim_IntList", In((3, 4, 5), BF),
                   dim=[0, 2], ulp=1)]
    return out


def _softmax():
    out = []
    for fwd, bwd in (("aten._softmax.default", "aten._softmax_backward_data.default"),
                     ("aten._log_softmax.default", "aten._log_softmax_backward_data.default")):
        for s, d in (((7,), 0), ((3, 5), 1), ((2, 3, 4), 1), ((129, 257), -1)):
            out.append(op_case(fwd, In(s, BF, kind="uniform", lo=-8, hi=8), dim=d, half_to_float=False,
                               ulp=1, ulp_scale=1))
            out.append(Case(bwd, Program(
                {"x": In(s, BF, kind="uniform", lo=-4, hi=4), "g": In(s, BF)},
                [Node(fwd, ["x"], {"dim": d, "half_to_float": False}),
                 Node(bwd, ["g", "n0"], {"dim": d, "input_dtype": BF})]), ulp=1, ulp_scale=2))
        out.append(op_case(fwd, In((4, 6), BF, kind="special"), dim=1, half_to_float=False, ulp=1, ulp_scale=1))
    # autocast: log_softmax ran in float32 on a bfloat16 input; its backward
    # takes float32 grad and output with input_dtype bfloat16, and torch's
    # CPU kernel returns float32 (its decomposition would cast to bfloat16).
    for s, d in (((3, 5), 1), ((2, 3, 4), 1), ((129, 257), -1)):
        out.append(Case("aten._log_softmax_backward_data.default", Program(
            {"x": In(s, BF, kind="uniform", lo=-4, hi=4), "g": In(s)},
            [Node(CAST, ["x"], {"dtype": F}),
             Node("aten._log_softmax.default", ["n0"], {"dim": d, "half_to_float": False}),
             Node("aten._log_softmax_backward_data.default", ["g", "n1"], {"dim": d, "input_dtype": BF})]),
            tol=(1e-5, 1e-6)))
    # After the cases above, so their names (and seeds) stay as they were.
    for fwd, bwd in (("aten._softmax.default", "aten._softmax_backward_data.default"),
                     ("aten._log_softmax.default", "aten._log_softmax_backward_data.default")):
        # Long lines (contiguous and strided), and masked attention: -inf
        # entries from masked_fill (some lines wholly masked: NaN both sides).
        for s, d in (((3, 70001), 1), ((20001, 3), 0), ((2, 3, 8, 8), -1), ((2, 8, 3), 1)):
            mask = In(s, B) if s != (2, 3, 8, 8) else In((8, 8), B)
            prog = {"x": In(s, BF, kind="uniform", lo=-8, hi=8), "m": mask, "g": In(s, BF)}
            masked = Node("aten.masked_fill.Scalar", ["x", "m"], {"value": "-inf"})
            out.append(Case(fwd, Program(prog, [masked, Node(fwd, ["n0"], {"dim": d, "half_to_float": False})]),
                            ulp=1, ulp_scale=1))
            out.append(Case(bwd, Program(prog, [
                masked, Node(fwd, ["n0"], {"dim": d, "half_to_float": False}),
                Node(bwd, ["g", "n1"], {"dim": d, "input_dtype": BF})]), ulp=1, ulp_scale=2))
    return out


def _matmuls():
    """float32 accumulation on both sides, in different orders: outputs 1 ulp
    apart, of the output's scale where a dot product cancels."""
    out = []
    for m, k, n in ((3, 4, 5), (1, 7, 1), (17, 33, 9), (64, 300, 65)):
        out.append(op_case("aten.mm.default", In((m, k), BF), In((k, n), BF), ulp=1, ulp_scale=1))
    out += [op_case("aten.bmm.default", In((3, 5, 7), BF), In((3, 7, 4), BF), ulp=1, ulp_scale=1),
            op_case("aten.addmm.default", In((5,), BF), In((3, 4), BF), In((4, 5), BF), ulp=1, ulp_scale=2),
            op_case("aten.addmm.default", In((3, 5), BF), In((3, 4), BF), In((4, 5), BF), beta=0.5, alpha=2,
                    ulp=1, ulp_scale=2),
            op_case("aten.addmm.default", In((64,), BF), In((16, 200), BF), In((200, 64), BF), ulp=1, ulp_scale=2),
            viewed("aten.t.default", {}, "aten.mm.default", In((4, 3), BF), In((4, 5), BF), ulp=1, ulp_scale=1)]
    # fold_transpose's addmm reading its weight transposed: nn.Linear under autocast.
    out += [op_case("trainstep.addmm", In((5,), BF), In((3, 4), BF), In((5, 4), BF), beta=1, alpha=1,
                    trans_a=False, trans_b=True, ulp=1, ulp_scale=2),
            op_case("trainstep.addmm", In((64,), BF), In((200, 16), BF), In((64, 200), BF), beta=1, alpha=1,
                    trans_a=True, trans_b=True, ulp=1, ulp_scale=2)]
    return out


def _conv_attrs(stride, padding, dilation, groups):
    return dict(stride=stride, padding=padding, dilation=dilation, transposed=False,
                output_padding=[0, 0], groups=groups)


CONVS = [((2, 3, 9, 9), (4, 3, 3, 3), True, [1, 1], [0, 0], [1, 1], 1),
         ((1, 4, 10, 7), (6, 2, 3, 2), True, [1, 2], [2, 1], [1, 1], 2),
         ((2, 4, 8, 8), (4, 1, 3, 3), False, [1, 1], [1, 1], [1, 1], 4)]


def _convs():
    out = []
    for x, w, bias, st, pad, dil, g in CONVS:
        a = _conv_attrs(st, pad, dil, g)
        b = In((w[0],), BF) if bias else None
        out.append(op_case("aten.convolution.default", In(x, BF), In(w, BF), b, ulp=1, ulp_scale=2, **a))
        oh = (x[2] + 2 * pad[0] - dil[0] * (w[2] - 1) - 1) // st[0] + 1
        ow = (x[3] + 2 * pad[1] - dil[1] * (w[3] - 1) - 1) // st[1] + 1
        for mask in ([True, True, bias], [True, False, False]):
            c = op_case("aten.convolution_backward.default", In((x[0], w[0], oh, ow), BF), In(x, BF), In(w, BF),
                        bias_sizes=[w[0]] if bias else None, output_mask=mask, ulp=1, ulp_scale=2, **a)
            c.program.outputs = [f"n0.{j}" for j in range(3) if mask[j]]
            out.append(c)
    return out


def _pools():
    out = []
    for x, k, st, pad in (((2, 3, 8, 8), [2, 2], [2, 2], [0, 0]), ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1]),
                          ((2, 4, 7, 7), [3, 3], [3, 3], [1, 1])):
        a = dict(kernel_size=k, stride=st, padding=pad, dilation=[1, 1], ceil_mode=False)
        out.append(op_case("aten.max_pool2d_with_indices.default", In(x, BF), **a))
        # Overlapping windows add gradients: in float32 here, so 1 ulp.
        overlap = st[0] < k[0]
        out.append(Case("aten.max_pool2d_with_indices_backward.default", Program(
            {"x": In(x, BF)},
            [Node("aten.max_pool2d_with_indices.default", ["x"], a),
             Node("aten.mul.Tensor", ["n0.0", "n0.0"]),
             Node("aten.max_pool2d_with_indices_backward.default", ["n1", "x", "n0.1"], a)]),
            ulp=1 if overlap else 0))
    a = dict(kernel_size=[2, 2], stride=[2, 2], padding=[0, 0], dilation=[1, 1], ceil_mode=False)
    out.append(op_case("aten.max_pool2d_with_indices.default", In((1, 2, 6, 6), BF, kind="special"), **a))
    return out


def _norms():
    out = []
    op = "aten.native_layer_norm.default"
    for s, ns in (((4, 8), [8]), ((2, 3, 16), [16]), ((300, 128), [128])):
        ref = _round_once(lambda x, w, b, ns=ns: torch.ops.aten.native_layer_norm.default(x, ns, w, b, 1e-5))
        out.append(op_case(op, In(s, BF), In(tuple(ns), BF), In(tuple(ns), BF), normalized_shape=ns, eps=1e-5,
                           ulp=1, ulp_scale=1, ref=ref))
    ref = _round_once(lambda x: torch.ops.aten.native_layer_norm.default(x, [10], None, None, 1e-5))
    out.append(op_case(op, In((6, 10), BF), None, None, normalized_shape=[10], eps=1e-5, ulp=1, ulp_scale=1,
                       ref=ref))
    return out


# Batch norm in torch's mixed form: bfloat16 input, output, grad_out and
# grad_input; float32 weight, bias, running stats, saves and grad_weight /
# grad_bias (src/ops/batch_norm.cpp, bfloat16 kernels). Statistics sum in
# another order than torch's, so a float32 coefficient may move by an ulp and
# an output round the other way. Training without weight and bias has no
# float32 tensor, so torch returns bfloat16 saves there
# (_batch_norms_no_params).
BN_TOL = (1e-5, 1e-5)


def _bn_params(c, affine, running):
    w, b = (In((c,), F, kind="uniform", lo=0.5, hi=1.5), In((c,), F)) if affine else (None, None)
    rm, rv = (In((c,), F), In((c,), F, kind="positive")) if running else (None, None)
    return w, b, rm, rv


def _batch_norms():
    out = []
    op, bwd = "aten.native_batch_norm.default", "aten.native_batch_norm_backward.default"
    for s in ((4, 3), (2, 3, 4, 5), (5, 1, 7, 7), (2, 3, 300), (16, 8, 16, 16)):
        for affine, training in ((True, True), (False, False), (True, False)):
            w, b, rm, rv = _bn_params(s[1], affine, not training)
            out.append(op_case(op, In(s, BF), w, b, rm, rv, training=training, momentum=0.1, eps=1e-5,
                               ulp=1, ulp_scale=1, tol=BN_TOL))
    for s in ((4, 3), (2, 3, 4, 5), (16, 8, 16, 16)):
        for affine, train, mask in ((True, True, [True, True, True]), (False, False, [True, False, False]),
                                    (True, True, [False, True, True]), (True, False, [True, True, True])):
            ins = {"x": In(s, BF)}
            w, b, rm, rv = _bn_params(s[1], affine, not train)
            for k, v in (("w", w), ("b", b), ("rm", rm), ("rv", rv)):
                if v is not None:
                    ins[k] = v
            wn, rmn, rvn = ("w" if affine else None), ("rm" if not train else None), ("rv" if not train else None)
            fa = dict(training=train, momentum=0.1, eps=1e-5)
            ba = dict(train=train, eps=1e-5, output_mask=mask)
            out.append(Case(bwd, Program(ins, [
                Node(op, ["x", wn, "b" if affine else None, rmn, rvn], fa),
                Node("aten.mul.Tensor", ["n0.0", "n0.0"]),
                Node(bwd, ["n1", "x", wn, rmn, rvn, "n0.1", "n0.2"], ba)]),
                ulp=1, ulp_scale=1, tol=(1e-4, 1e-4)))
    return out


def _embedding(weight, idx):
    return torch.nn.functional.embedding(idx, weight)


def _shapes():
    """Moves bytes: bitwise. Embedding is index_select on the flattened
    indices (as the exporter decomposes it), checked against torch's
    embedding."""
    idx = torch.tensor([[3, 0, 7], [7, 1, 1]], dtype=torch.int64)
    return [
        op_case("aten.view.default", In((3, 4), BF), size=[4, 3]),
        op_case("aten.permute.default", In((2, 3, 4), BF), dims=[2, 0, 1]),
        op_case("aten.cat.default", [In((2, 3), BF), In((4, 3), BF)], dim=0),
        op_case("aten.cat.default", [In((2, 3), BF, kind="special"), In((2, 5), BF)], dim=1),
        op_case("aten.slice.Tensor", In((5, 10), BF), dim=1, start=1, end=9, step=2),
        op_case("aten.t.default", In((3, 5), BF)),
        op_case("aten.expand.default", In((3, 1), BF), size=[3, 4]),
        op_case("aten.index_select.default", In((9, 5), BF), torch.tensor([3, 0, 8, 3]), dim=0),
        Case("aten.index_select.default", Program(
            {"w": In((8, 5), BF), "i": idx},
            [Node("aten.view.default", ["i"], {"size": [-1]}),
             Node("aten.index_select.default", ["w", "n0"], {"dim": 0}),
             Node("aten.view.default", ["n1"], {"size": [2, 3, 5]})]), ref=_embedding),
        # relu's backward, as the exporter writes threshold_backward: where(y <= 0, 0, grad)
        Case("aten.where.self", Program(
            {"x": In((4, 6), BF, kind="special"), "g": In((4, 6), BF)},
            [Node("aten.relu.default", ["x"]),
             Node("aten.le.Scalar", ["n0"], {"other": 0}),
             Node("trainstep.constant", [], {"dtype": BF, "value": 0.0}),
             Node("aten.where.self", ["n1", "n2", "g"])]),
            ref=lambda x, g: torch.ops.aten.threshold_backward.default(g, torch.relu(x), 0)),
    ]


def _where_bits():
    """where on a bfloat16 result selects bit patterns: the attention mask's
    broadcast condition, and one-element float operands rounded once (a
    float64 through float32, as c10 converts). Last, so the cases above keep
    their names (and seeds)."""
    out = []
    for v in (float("-inf"), 0.1, 1.0 + 2.0 ** -8 + 2.0 ** -30, 3.0e38):
        out += [op_case("aten.where.self", In((1, 1, 8, 8), B), In((2, 3, 8, 8), BF), In((), F, kind="values", values=v)),
                op_case("aten.where.self", In((3, 1), B), In((), D, kind="values", values=v), In((3, 7), BF)),
                op_case("aten.where.self", In((5, 6), B), In((5, 6), BF, kind="special"), Scalar(v))]
    out += [op_case("aten.where.self", In((2, 1, 70001), B), In((2, 3, 70001), BF), In((3, 1), BF)),
            op_case("aten.where.self", In((4, 5), B), In((4, 5), BF), In((1,), F)),  # one element, 1-d: float32
            op_case("aten.where.self", In((4, 5), B), In((4, 5), BF), In((4, 5), I))]  # int64 -> bfloat16
    return out


def _reductions_native():
    """sum.dim_IntList and mean.dim read bfloat16 in place (Bf16::Native),
    rounding as their float32 twin does: compared as _reductions. Rows,
    columns, the general path, long rows (split across threads), keepdim
    and a float32 dtype. Last, so the cases above keep their names (and
    seeds)."""
    out = []
    for shape, dims, keep in (((4, 6, 5), [1], False), ((4, 6, 5), [-1], True), ((4, 6, 5), [0, 2], True),
                              ((2, 3, 4, 5), [3, 1], False), ((6, 7), [0, 1], False), ((3, 70001), [1], False),
                              ((1, 300000), [-1], True), ((70001, 3), [0], True)):
        # torch 2.x's bfloat16 sum of a long row drifts by many bfloat16 ulps
        # of the result (its partial sums pass through bfloat16); 1.13's does
        # not. Long rows: the reference sums the float32 upcast, rounded once.
        long_row = shape[-1] > 10000 and dims[-1] % len(shape) == len(shape) - 1
        sum_ref = (lambda x, d=dims, k=keep: [x.float().sum(d, keepdim=k).to(torch.bfloat16)]) if long_row else None
        mean_ref = (lambda x, d=dims, k=keep: [x.float().mean(d, keepdim=k).to(torch.bfloat16)]) if long_row else None
        out += [op_case("aten.sum.dim_IntList", In(shape, BF), dim=dims, keepdim=keep, ulp=1, ulp_scale=1, ref=sum_ref),
                op_case("aten.mean.dim", In(shape, BF), dim=dims, keepdim=keep, ulp=1, ulp_scale=1, ref=mean_ref)]
    for shape, dims in (((8, 33, 17), [0, 2]), ((3, 70001), [1])):
        out += [op_case("aten.sum.dim_IntList", In(shape, BF), dim=dims, keepdim=False, dtype=F, tol=(1e-4, 1e-4)),
                op_case("aten.mean.dim", In(shape, BF), dim=dims, keepdim=True, dtype=F, tol=(1e-5, 1e-5))]
    out.append(op_case("aten.mean.dim", In((4, 6), BF, kind="special"), dim=[1], keepdim=False, ulp=1))
    return out


def _softmax_bits():
    """log_softmax bit for bit: along the last dim torch rounds log(sum) to
    bfloat16 before the last step (a float32 log(sum) put 11-14 % of
    elements an ulp off); along another dim (trailing 1s included) it
    rounds once. Its backward rounds once in 2.x; 1.13 rounds sum(g) to
    bfloat16 first, an ulp or two off. softmax, and the long line, sum in
    another order (an ulp now and then). Last, so the cases above keep
    their names (and seeds)."""
    out = []
    for fwd, bwd in (("aten._softmax.default", "aten._softmax_backward_data.default"),
                     ("aten._log_softmax.default", "aten._log_softmax_backward_data.default")):
        log = fwd == "aten._log_softmax.default"
        for s, d in (((64, 10), 1), ((7,), 0), ((129, 257), -1), ((2, 3, 40), 2), ((3, 70001), 1)):
            near = dict(ulp=1) if not log or s[-1] > 10000 else {}
            back = near if not TORCH_1 else dict(ulp=1, ulp_scale=2)
            out.append(op_case(fwd, In(s, BF, kind="uniform", lo=-8, hi=8), dim=d, half_to_float=False, **near))
            out.append(Case(bwd, Program(
                {"x": In(s, BF, kind="uniform", lo=-4, hi=4), "g": In(s, BF)},
                [Node(fwd, ["x"], {"dim": d, "half_to_float": False}),
                 Node(bwd, ["g", "n0"], {"dim": d, "input_dtype": BF})]), **back))
        # dim 1 of [64, 10, 1] is not the last: torch's general kernel.
        out.append(op_case(fwd, In((64, 10, 1), BF, kind="uniform", lo=-8, hi=8), dim=1, half_to_float=False,
                           ulp=0 if log and not TORCH_1 else 1))
    # Masked lines: -inf entries give -inf; wholly masked lines NaN.
    prog = {"x": In((2, 3, 8, 8), BF, kind="uniform", lo=-8, hi=8), "m": In((8, 8), B)}
    out.append(Case("aten._log_softmax.default", Program(prog, [
        Node("aten.masked_fill.Scalar", ["x", "m"], {"value": "-inf"}),
        Node("aten._log_softmax.default", ["n0"], {"dim": -1, "half_to_float": False})])))
    return out


def _batch_norms_no_params():
    """Training batch norm with no weight, bias or running stats (affine=False
    as the exporter captures it; instance norm): torch keeps the saves in
    bfloat16 then, and the backward reads them so. torch's backward on that
    path (not the mixed-type one) rounds between its steps where ours
    rounds once: a few ulps of the output's scale apart. Last, so the
    cases above keep their names (and seeds)."""
    out = []
    op, bwd = "aten.native_batch_norm.default", "aten.native_batch_norm_backward.default"
    fa = dict(training=True, momentum=0.1, eps=1e-5)
    for s in ((4, 3), (2, 3, 4, 5), (16, 8, 16, 16)):
        c = op_case(op, In(s, BF), None, None, None, None, ulp=1, ulp_scale=1, tol=BN_TOL, **fa)
        c.program.outputs = ["n0.0", "n0.1", "n0.2"]
        out.append(c)
        out.append(Case(bwd, Program({"x": In(s, BF)}, [
            Node(op, ["x", None, None, None, None], fa),
            Node("aten.mul.Tensor", ["n0.0", "n0.0"]),
            Node(bwd, ["n1", "x", None, None, None, "n0.1", "n0.2"],
                 dict(train=True, eps=1e-5, output_mask=[True, False, False]))]),
            ulp=1, ulp_scale=4, tol=(1e-4, 1e-4)))
    return out


def _ln_mixed_bwd_ref(ns):
    """The mixed backward in float32 on the bfloat16 values, dx rounded once:
    torch 2.x sums the weight and bias gradients through bfloat16 and
    drifts (by 60 on 300 rows of 128), as its long bfloat16 sums do."""
    def ref(x, w, b):
        y, mu, rs = torch.ops.aten.native_layer_norm.default(x, ns, w, b, 1e-5)
        g = (y * y).float()
        dx, dw, db = torch.ops.aten.native_layer_norm_backward.default(g, x.float(), ns, mu, rs, w, b,
                                                                      [True, True, True])
        return [dx.to(torch.bfloat16), dw, db]
    return ref


def _layer_norms_mixed():
    """torch's mixed-type layer norm (2.x; 1.13 has none): a bfloat16 input
    with float32 weight and bias, as autocast leaves BERT's prediction-head
    norm on a bfloat16 activation; mean, rstd and the weight and bias
    gradients are float32. Last, so the cases above keep their names (and
    seeds)."""
    out = []
    op, bwd = "aten.native_layer_norm.default", "aten.native_layer_norm_backward.default"
    for s, ns in (((4, 8), [8]), ((2, 3, 32), [32]), ((300, 128), [128])):
        c = op_case(op, In(s, BF), In(tuple(ns), F, kind="uniform", lo=0.5, hi=1.5), In(tuple(ns), F),
                    normalized_shape=ns, eps=1e-5, ulp=1, ulp_scale=1, tol=(1e-5, 1e-5))
        c.program.outputs = ["n0.0", "n0.1", "n0.2"]
        out.append(c)
        out.append(Case(bwd, Program(
            {"x": In(s, BF), "w": In(tuple(ns), F, kind="uniform", lo=0.5, hi=1.5), "b": In(tuple(ns), F)},
            [Node(op, ["x", "w", "b"], {"normalized_shape": ns, "eps": 1e-5}),
             Node("aten.mul.Tensor", ["n0.0", "n0.0"]),
             Node(bwd, ["n1", "x", "n0.1", "n0.2", "w", "b"],
                  {"normalized_shape": ns, "output_mask": [True, True, True]})]),
            ulp=1, ulp_scale=2, tol=(1e-4, 1e-4), ref=_ln_mixed_bwd_ref(ns)))
    for c in out:
        c.min_torch = 2
    return out


def cases():
    return (_casts() + _scalars() + _binary() + _compare() + _unary() + _select() + _reductions() + _softmax() +
            _matmuls() + _convs() + _pools() + _norms() + _batch_norms() +
            _shapes() + _where_bits() + _reductions_native() + _softmax_bits() + _batch_norms_no_params() + _layer_norms_mixed())
