"""Oracle cases: avg_pool2d, _adaptive_avg_pool2d and adaptive_max_pool2d,
each with its backward (src/ops/avg_pool.cpp)."""
import torch

from .harness import Case, In, Node, Program, neg_case, op_case, viewed

F, D, I = "float32", "float64", "int64"
A = torch.ops.aten

# (input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG = [((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], False, True, None),
       ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], False, True, None),
       ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], False, False, None),   # padding not counted
       ((1, 2, 9, 7), [3, 2], [2, 1], [1, 0], True, True, None),     # ceil_mode: a clipped last window
       ((1, 2, 10, 7), [3, 2], [2, 3], [1, 1], True, False, None),
       ((2, 2, 10, 10), [3, 3], [], [1, 1], False, True, 4),         # stride defaults to the kernel; divisor 4
       ((1, 1, 6, 5), [2, 3], [1, 1], [1, 1], False, True, -3),
       ((3, 7, 7), [2, 2], [2, 2], [0, 0], True, True, None),        # unbatched
       ((1, 2, 5, 5), [5, 5], [1, 1], [2, 2], False, False, None),   # one output... per padded window
       ((1, 1, 1, 1), [1, 1], [1, 1], [0, 0], False, True, None),
       ((0, 2, 5, 5), [2, 2], [2, 2], [0, 0], False, True, None),    # empty batch
       ((8, 16, 24, 24), [3, 3], [2, 2], [1, 1], True, False, None)]  # over the parallel threshold

# (input, output_size)
ADAPTIVE = [((2, 3, 8, 8), [4, 4]),
            ((1, 2, 9, 7), [4, 3]),     # overlapping cells
            ((1, 2, 5, 7), [7, 9]),     # more cells than pixels
            ((3, 7, 7), [3, 2]),        # unbatched
            ((1, 2, 6, 6), [1, 1]),
            ((2, 2, 5, 5), [5, 5]),
            ((2, 2, 5, 5), [0, 2]),     # empty output
            ((0, 2, 5, 5), [2, 2]),     # empty batch
            ((8, 16, 24, 24), [5, 7])]  # over the parallel threshold


def _avg_attrs(k, st, pad, ceil, inc, div):
    return dict(kernel_size=k, stride=st, padding=pad, ceil_mode=ceil, count_include_pad=inc,
                divisor_override=div)


def _avg():
    out = []
    for dt in (F, D):
        for x, *a in AVG:
            if dt == D and x[0] * x[1] > 16:
                continue
            attrs = _avg_attrs(*a)
            y = A.avg_pool2d.default(torch.zeros(x), *a)
            out.append(op_case("aten.avg_pool2d.default", In(x, dt), **attrs))
            out.append(op_case("aten.avg_pool2d_backward.default", In(tuple(y.shape), dt), In(x, dt), **attrs))
    a = _avg_attrs([3, 3], [1, 1], [1, 1], False, False, None)
    out += [op_case("aten.avg_pool2d.default", In((1, 2, 6, 6), kind="special"), **a),
            viewed("aten.permute.default", {"dims": [0, 3, 1, 2]}, "aten.avg_pool2d.default", In((2, 6, 6, 3)), **a)]
    return out


def _adaptive():
    out = []
    for dt in (F, D):
        for x, osz in ADAPTIVE:
            if dt == D and x[0] * x[1] > 16:
                continue
            y = tuple(x[:-2]) + tuple(osz)
            out.append(op_case("aten._adaptive_avg_pool2d.default", In(x, dt), output_size=osz))
            out.append(op_case("aten.adaptive_max_pool2d.default", In(x, dt), output_size=osz))
            if 0 in osz:  # torch's backward ops refuse an empty output
                continue
            out.append(op_case("aten._adaptive_avg_pool2d_backward.default", In(y, dt), In(x, dt)))
            # backward takes the forward's indices: pool, a grad_output
            # shaped like its output, then the backward.
            out.append(Case("aten.adaptive_max_pool2d_backward.default", Program(
                {"x": In(x, dt)},
                [Node("aten.adaptive_max_pool2d.default", ["x"], {"output_size": osz}),
                 Node("aten.mul.Tensor", ["n0.0", "n0.0"]),
                 Node("aten.adaptive_max_pool2d_backward.default", ["n1", "x", "n0.1"])])))
    # Ties (integer-valued inputs): the first maximum wins; NaN counts as the
    # maximum. NaN and inf through the averages.
    out += [op_case("aten.adaptive_max_pool2d.default", In((1, 2, 7, 6), kind="int", lo=0, hi=3), output_size=[3, 4]),
            op_case("aten.adaptive_max_pool2d.default", In((1, 2, 7, 6), kind="special"), output_size=[3, 4]),
            op_case("aten._adaptive_avg_pool2d.default", In((1, 2, 7, 6), kind="special"), output_size=[3, 4]),
            viewed("aten.permute.default", {"dims": [0, 3, 1, 2]}, "aten._adaptive_avg_pool2d.default",
                   In((2, 6, 5, 3)), output_size=[4, 3]),
            viewed("aten.permute.default", {"dims": [0, 3, 1, 2]}, "aten.adaptive_max_pool2d.default",
                   In((2, 6, 5, 3)), output_size=[4, 3])]
    return out


def _negatives():
    avg = "aten.avg_pool2d.default"
    a = _avg_attrs([2, 2], [2, 2], [0, 0], False, True, None)
    out = [
        neg_case(avg, In((1, 2, 5, 5), I), **a, error="input must be float32, float64 or bfloat16, got int64[1, 2, 5, 5]",
                 unsupported="integer pooling"),
        neg_case(avg, In((5, 5)), **a, error="input must be rank 3 (C, H, W) or 4 (N, C, H, W), got float32[5, 5]"),
        neg_case(avg, In((1, 0, 5, 5)), **a, error="input must have non-empty C, H and W, got float32[1, 0, 5, 5]"),
        neg_case(avg, In((1, 2, 5, 5)), **_avg_attrs([2, 2], [1, 1], [2, 2], False, True, None),
                 error="padding must be between 0 and half the kernel size, got padding 2x2 for kernel 2x2"),
        neg_case(avg, In((1, 2, 5, 5)), **_avg_attrs([2, 2], [0, 1], [0, 0], False, True, None),
                 error="stride must be positive, got 0x1"),
        neg_case(avg, In((1, 2, 5, 5)), **_avg_attrs([2, 2], [1, 1], [0, 0], False, True, 0),
                 error="divisor_override must not be zero"),
        neg_case(avg, In((1, 2, 5, 5)), **_avg_attrs([6, 6], [], [0, 0], False, True, None),
                 error="output size is not positive: input float32[1, 2, 5, 5], kernel 6x6, padding 0x0 and "
                       "stride 6x6 give output 0x0"),
        neg_case("aten.avg_pool2d_backward.default", In((1, 2, 3, 3)), In((1, 2, 4, 4)), **a,
                 error="grad_output must be float32[1, 2, 2, 2], got float32[1, 2, 3, 3]"),
    ]
    for op in ("aten._adaptive_avg_pool2d.default", "aten.adaptive_max_pool2d.default"):
        out += [
            neg_case(op, In((1, 2, 5, 5)), output_size=[2], error="output_size must have 2 values, got 1"),
            neg_case(op, In((1, 2, 5, 5), I), output_size=[2, 2],
                     error="input must be float32, float64 or bfloat16, got int64[1, 2, 5, 5]"),
            neg_case(op, In((1, 2, 0, 5)), output_size=[2, 2],
                     error="input must have non-empty C, H and W, got float32[1, 2, 0, 5]"),
        ]
    out += [
        neg_case("aten._adaptive_avg_pool2d.default", In((1, 2, 5, 5)), output_size=[-1, 2],
                 error="output size must not be negative, got -1x2"),
        neg_case("aten._adaptive_avg_pool2d.default", In((0, 2, 5, 5)), output_size=[1 << 25, 2],
                 error="output size 33554432x2 is too large (at most 16777216 a side)",
                 unsupported="make() tabulates each output side; an empty batch does not bound them"),
        neg_case("aten._adaptive_avg_pool2d_backward.default", In((2, 2, 3, 3), D), In((2, 2, 5, 5)),
                 error="grad_output must be float32[2, 2, 3, 3], got float64[2, 2, 3, 3]"),
        neg_case("aten._adaptive_avg_pool2d_backward.default", In((1, 2, 3, 3)), In((2, 2, 5, 5)),
                 error="grad_output must be float32[2, 2, 3, 3], got float32[1, 2, 3, 3]",
                 unsupported="torch reads grad_output's batch as self's"),
        neg_case("aten._adaptive_avg_pool2d_backward.default", In((2, 2, 0, 2)), In((2, 2, 5, 5)),
                 error="grad_output must have non-empty H and W, got float32[2, 2, 0, 2]"),
        neg_case("aten.adaptive_max_pool2d_backward.default", In((2, 2, 2, 2)), In((2, 2, 5, 5)),
                 In((2, 2, 2, 2)), error="indices must be int64[2, 2, 2, 2], got float32[2, 2, 2, 2]"),
        neg_case("aten.adaptive_max_pool2d_backward.default", In((2, 2, 0, 2)), In((2, 2, 5, 5)),
                 In((2, 2, 0, 2), I), error="grad_output must have non-empty H and W, got float32[2, 2, 0, 2]"),
    ]
    return out


def cases():
    return _avg() + _adaptive() + _negatives()
