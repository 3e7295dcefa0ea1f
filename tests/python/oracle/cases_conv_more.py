"""Oracle cases: 1-D convolution (the 2-D kernels with H = 1, fused forms
included) and transposed convolution, 1-D and 2-D (oneDNN deconvolution in
float32, im2col + GEMM in float64, plain layouts only, never fused), forward
and backward
(src/ops/conv.cpp, src/ops/conv_transpose.cpp)."""
from itertools import product

from .harness import Case, In, Node, Program, neg_case, op_case

F, D = "float32", "float64"
# oneDNN and torch sum in different orders.
TOL = (1e-4, 1e-4)
# three chained 144-term convolutions: the rounding differences add up.
CHAIN_TOL = (1e-3, 2e-3)
MASKS = [list(m) for m in product([True, False], repeat=3) if any(m)]

# 1-D: (input, weight, bias?, stride, padding, dilation, groups)
CONV1D = [((2, 3, 9), (4, 3, 3), True, [1], [0], [1], 1),
          ((2, 4, 10), (6, 2, 3), True, [2], [1], [1], 2),  # groups, stride
          ((1, 2, 11), (3, 2, 3), False, [1], [2], [2], 1),  # dilated
          ((2, 4, 8), (4, 1, 3), True, [1], [1], [1], 4),  # depthwise
          ((3, 5, 7), (7, 5, 1), True, [1], [0], [1], 1),  # kernel 1
          ((2, 16, 40), (16, 16, 5), True, [1], [2], [1], 1)]  # 16 channels: still plain (rank 3)

# transposed, weight (C_in, C_out/groups, k...):
# (input, weight, bias?, stride, padding, output_padding, dilation, groups)
TCONVS = [((2, 4, 5, 5), (4, 3, 3, 3), True, [2, 2], [1, 1], [1, 1], [1, 1], 2),  # stride 2, op 1, groups
          ((2, 3, 6, 6), (3, 4, 3, 3), False, [1, 1], [0, 0], [0, 0], [1, 1], 1),
          ((1, 2, 5, 4), (2, 3, 3, 2), True, [2, 1], [1, 0], [1, 0], [2, 1], 1),  # dilated, mixed
          ((1, 2, 5, 5), (2, 2, 3, 3), True, [1, 1], [1, 1], [1, 1], [2, 2], 1),  # op < dilation only
          # output_padding - padding >= stride (< dilation): oneDNN computes the
          # leading part, the tail rows / columns are bias only (conv_transpose.cpp)
          ((1, 2, 5, 5), (2, 2, 3, 3), False, [1, 1], [0, 0], [1, 1], [2, 2], 1),
          ((2, 2, 5, 4), (2, 2, 3, 3), True, [1, 1], [0, 1], [1, 2], [2, 3], 1),
          ((2, 8, 44, 44), (8, 8, 3, 3), True, [1, 1], [0, 0], [1, 1], [2, 2], 1),  # parallel tail
          ((2, 4, 4, 4), (4, 1, 3, 3), True, [2, 2], [0, 0], [1, 1], [1, 1], 4),  # depthwise
          ((1, 3, 4, 4), (3, 2, 2, 2), True, [2, 2], [0, 0], [0, 0], [1, 1], 1),  # k = stride
          ((2, 16, 5, 5), (16, 16, 3, 3), True, [2, 2], [1, 1], [1, 1], [1, 1], 1),  # 16 channels
          # 1-D
          ((2, 4, 7), (4, 3, 3), True, [2], [1], [1], [1], 2),
          ((2, 3, 6), (3, 5, 4), False, [3], [0], [2], [1], 1),
          ((1, 2, 9), (2, 2, 3), True, [1], [2], [1], [2], 1),  # dilated, op < dilation
          ((2, 16, 12), (16, 8, 3), True, [2], [1], [1], [1], 2),
          ((2, 3, 6), (3, 2, 2), True, [2], [0], [2], [3], 1)]  # a tail of 2


def _attrs(stride, padding, dilation, groups, transposed=False, output_padding=None):
    return dict(stride=stride, padding=padding, dilation=dilation, transposed=transposed,
                output_padding=output_padding or [0] * len(stride), groups=groups)


def _conv_out(x, w, st, pad, dil):
    return tuple((x[2 + d] + 2 * pad[d] - dil[d] * (w[2 + d] - 1) - 1) // st[d] + 1
                 for d in range(len(st)))


def _tconv_out(x, w, st, pad, op, dil):
    return tuple((x[2 + d] - 1) * st[d] - 2 * pad[d] + dil[d] * (w[2 + d] - 1) + op[d] + 1
                 for d in range(len(st)))


def _bwd(dy, x, w, mask, bias_sizes, **a):
    """convolution_backward returning only the requested gradients: for a
    1-D convolution torch eager also returns an unfilled (O, C/g, 1, kL)
    tensor for an unrequested grad_weight (conv_grad_weight_type)."""
    c = op_case("aten.convolution_backward.default", In(dy), In(x), In(w),
                bias_sizes=bias_sizes, output_mask=mask, tol=TOL, **a)
    c.program.outputs = [f"n0.{j}" for j in range(3) if mask[j]]
    return c


def _conv1d():
    out = []
    for x, w, bias, st, pad, dil, g in CONV1D:
        a = _attrs(st, pad, dil, g)
        b = In((w[0],)) if bias else None
        out.append(op_case("aten.convolution.default", In(x), In(w), b, tol=TOL, **a))
        out.append(op_case("trainstep.conv2d_relu", In(x), In(w), b, tol=TOL, **a))
        out.append(Case("trainstep.conv2d_relu", Program(
            {"x": In(x), "w": In(w), **({"b": In((w[0],))} if bias else {})},
            [Node("aten.convolution.default", ["x", "w", "b" if bias else None], a),
             Node("aten.relu.default", ["n0"])]), tol=TOL,
            expect_ops={"opt": ["trainstep.conv2d_relu"]}))
        dy = (x[0], w[0]) + _conv_out(x, w, st, pad, dil)
        for mask in MASKS:
            if mask[2] and not bias:
                continue
            out.append(_bwd(dy, x, w, mask, [w[0]] if bias else None, **a))
        for mask in ([True, True, bias], [True, False, False]):
            out.append(Case("trainstep.conv_backward_relu", Program(
                {"a": In(x), "w": In(w), "dy": In(dy)},
                [Node("aten.relu.default", ["a"]),
                 Node("aten.convolution_backward.default", ["dy", "n0", "w"],
                      dict(bias_sizes=[w[0]] if bias else None, output_mask=mask, **a)),
                 Node("aten.le.Scalar", ["n0"], {"other": 0}),
                 Node("trainstep.constant", [], {"dtype": F, "value": 0.0}),
                 Node("aten.where.self", ["n2", "n3", "n1.0"])],
                outputs=["n4"] + [f"n1.{j}" for j in (1, 2) if mask[j]]), tol=TOL,
                expect_ops={"opt": ["trainstep.conv_backward_relu"]}))
    # float64 1-D: im2col + Gemm64 with H = 1.
    x, w, bias, st, pad, dil, g = CONV1D[1]
    a = _attrs(st, pad, dil, g)
    dy = (x[0], w[0]) + _conv_out(x, w, st, pad, dil)
    out.append(op_case("aten.convolution.default", In(x, D), In(w, D), In((w[0],), D),
                       tol=(1e-11, 1e-12), **a))
    out.append(op_case("aten.convolution_backward.default", In(dy, D), In(x, D), In(w, D),
                       bias_sizes=[w[0]], output_mask=[True, True, True], tol=(1e-11, 1e-12), **a))
    out.append(op_case("aten.convolution.default", In((2, 3, 9), kind="special"), In((4, 3, 3)),
                       In((4,)), tol=TOL, **_attrs([1], [0], [1], 1)))
    return out


def _tconvs():
    out = []
    for x, w, bias, st, pad, op, dil, g in TCONVS:
        a = _attrs(st, pad, dil, g, transposed=True, output_padding=op)
        b = In((w[1] * g,)) if bias else None
        out.append(op_case("aten.convolution.default", In(x), In(w), b, tol=TOL, **a))
        dy = (x[0], w[1] * g) + _tconv_out(x, w, st, pad, op, dil)
        for mask in MASKS:
            if mask[2] and not bias:
                continue
            out.append(_bwd(dy, x, w, mask, [w[1] * g] if bias else None, **a))
    # float64 (conv.cpp's im2col + GEMM over the dual direct convolution):
    # stride, output_padding and groups; dilation; 1-D; a tail of 2.
    for x, w, bias, st, pad, op, dil, g in (TCONVS[0], TCONVS[2], TCONVS[5], TCONVS[10],
                                            TCONVS[14]):
        a = _attrs(st, pad, dil, g, transposed=True, output_padding=op)
        b = In((w[1] * g,), D) if bias else None
        out.append(op_case("aten.convolution.default", In(x, D), In(w, D), b,
                           tol=(1e-11, 1e-12), **a))
        dy = (x[0], w[1] * g) + _tconv_out(x, w, st, pad, op, dil)
        for mask in ([True, True, bias], [True, False, False], [False, True, False]):
            c = op_case("aten.convolution_backward.default", In(dy, D), In(x, D), In(w, D),
                        bias_sizes=[w[1] * g] if bias else None, output_mask=mask,
                        tol=(1e-11, 1e-12), **a)
            c.program.outputs = [f"n0.{j}" for j in range(3) if mask[j]]
            out.append(c)
    # transposed conv -> relu stays two nodes (no fused form); a conv ->
    # transposed conv -> conv chain over 16 channels: plan_layouts may block
    # the direct convolutions' ports but leaves the transposed one's plain.
    a = _attrs([2, 2], [1, 1], [1, 1], 2, transposed=True, output_padding=[1, 1])
    out.append(Case("aten.convolution.default", Program(
        {"x": In((2, 4, 5, 5)), "w": In((4, 3, 3, 3)), "b": In((6,))},
        [Node("aten.convolution.default", ["x", "w", "b"], a), Node("aten.relu.default", ["n0"])]),
        tol=TOL))
    c = _attrs([1, 1], [1, 1], [1, 1], 1)
    t = _attrs([2, 2], [1, 1], [1, 1], 1, transposed=True, output_padding=[1, 1])
    out.append(Case("aten.convolution.default", Program(
        {"x": In((2, 16, 6, 6)), "w0": In((16, 16, 3, 3)), "w1": In((16, 16, 3, 3)),
         "w2": In((16, 16, 3, 3))},
        [Node("aten.convolution.default", ["x", "w0", None], c),
         Node("aten.relu.default", ["n0"]),
         Node("aten.convolution.default", ["n1", "w1", None], t),
         Node("aten.relu.default", ["n2"]),
         Node("aten.convolution.default", ["n3", "w2", None], c)]), tol=CHAIN_TOL))
    # conv -> transposed conv -> conv with nothing between: the values
    # touching the transposed convolution stay plain.
    out.append(Case("aten.convolution.default", Program(
        {"x": In((2, 16, 6, 6)), "w0": In((16, 16, 3, 3)), "w1": In((16, 16, 3, 3)),
         "w2": In((16, 16, 3, 3))},
        [Node("aten.convolution.default", ["x", "w0", None], c),
         Node("aten.convolution.default", ["n0", "w1", None], t),
         Node("aten.convolution.default", ["n1", "w2", None], c)]), tol=CHAIN_TOL))
    # and its backward pattern: transposed conv backward of a relu output,
    # then relu's backward (where) stays unfused and plain.
    x, w, dy = (2, 16, 5, 5), (16, 16, 3, 3), (2, 16, 10, 10)
    out.append(Case("aten.convolution_backward.default", Program(
        {"a": In(x), "w": In(w), "dy": In(dy)},
        [Node("aten.relu.default", ["a"]),
         Node("aten.convolution_backward.default", ["dy", "n0", "w"],
              dict(bias_sizes=None, output_mask=[True, True, False], **t)),
         Node("aten.le.Scalar", ["n0"], {"other": 0}),
         Node("trainstep.constant", [], {"dtype": F, "value": 0.0}),
         Node("aten.where.self", ["n2", "n3", "n1.0"])],
        outputs=["n4", "n1.1"]), tol=TOL))
    out.append(op_case("aten.convolution.default", In((2, 4, 5, 5), kind="special"), In((4, 3, 3, 3)),
                       In((6,)), tol=TOL, **a))
    return out


def _negatives():
    c1 = _attrs([1], [0], [1], 1)
    c2 = _attrs([1, 1], [0, 0], [1, 1], 1)
    t2 = _attrs([1, 1], [0, 0], [1, 1], 1, transposed=True)
    return [
        neg_case("aten.convolution.default", In((2, 3, 9)), In((4, 3, 3, 3)), None, **c1,
                 error="weight must be rank 3 (O, C/groups, kL) for input float32[2, 3, 9], "
                       "got float32[4, 3, 3, 3]"),
        neg_case("aten.convolution.default", In((3, 9)), In((4, 3, 3)), None, **c1,
                 error="input must be rank 3 (N, C, L) or rank 4 (N, C, H, W), got float32[3, 9]"),
        neg_case("aten.convolution.default", In((2, 3, 9)), In((4, 3, 3)), None,
                 **dict(c1, stride=[1, 1]),
                 error="attribute 'stride' must have 1 value for a 1-D convolution, got 2"),
        neg_case("aten.convolution.default", In((2, 3, 2)), In((4, 3, 3)), None, **c1,
                 error="output size is not positive: input float32[2, 3, 2], weight float32[4, 3, 3], "
                       "padding 0, dilation 1 give output 0"),
        neg_case("aten.convolution.default", In((2, 4, 5, 5)), In((4, 3, 3, 3)), None,
                 **dict(t2, output_padding=[1, 1]),
                 error="output_padding must be smaller than stride or dilation, got output_padding 1x1 "
                       "with stride 1x1 and dilation 1x1"),
        neg_case("aten.convolution.default", In((2, 4, 7)), In((4, 3, 3)), None,
                 **dict(t2, stride=[2], padding=[0], dilation=[1], output_padding=[2]),
                 error="output_padding must be smaller than stride or dilation, got output_padding 2 "
                       "with stride 2 and dilation 1"),
        neg_case("aten.convolution.default", In((2, 3, 5, 5)), In((4, 3, 3, 3)), None, **t2,
                 error="input has 3 channels but transposed weight float32[4, 3, 3, 3] "
                       "(C_in, C_out/groups, ...) expects 4"),
        neg_case("aten.convolution.default", In((2, 3, 5, 5)), In((3, 2, 3, 3)), None,
                 **dict(t2, groups=2), error="input channels (3) must be divisible by groups (2)"),
        neg_case("aten.convolution.default", In((2, 3, 5)), In((3, 2, 3, 3)), None,
                 **dict(t2, stride=[1], padding=[0], dilation=[1], output_padding=[0]),
                 error="weight must be rank 3 (C_in, C_out/groups, kL) for input float32[2, 3, 5], "
                       "got float32[3, 2, 3, 3]"),
        neg_case("aten.convolution.default", In((2, 3, 5, 5)), In((3, 2, 3, 3)), In((3,)), **t2,
                 error="bias must be float32[2], got float32[3]"),
        neg_case("aten.convolution.default", In((2, 3, 5, 5), D), In((3, 2, 3, 3)), None, **t2,
                 error="input and weight must both be float32, both float64 or both bfloat16, got input "
                       "float64[2, 3, 5, 5] and weight float32[3, 2, 3, 3]"),
        neg_case("aten.convolution.default", In((1, 2, 3, 3)), In((2, 2, 3, 3)), None,
                 **dict(t2, padding=[3, 3]),
                 error="output size is not positive: input float32[1, 2, 3, 3], weight float32[2, 2, 3, 3], "
                       "stride 1x1, padding 3x3, dilation 1x1, output_padding 0x0 give output -1x-1"),
        neg_case("aten.convolution.default", In((1, 2, 1, 1)), In((2, 2, 1, 1)), In((2,)),
                 **dict(t2, padding=[1, 1], dilation=[3, 3], output_padding=[2, 2]),
                 error="the input reaches no output element (every one would be the bias alone): input "
                       "float32[1, 2, 1, 1], weight float32[2, 2, 1, 1], padding 1x1, dilation 3x3, "
                       "output_padding 2x2 are not supported",
                 unsupported="a transposed convolution whose output is the bias alone"),
        neg_case("aten.convolution_backward.default", In((2, 2, 5, 5)), In((2, 3, 5, 5)), In((3, 2, 3, 3)),
                 bias_sizes=[2], output_mask=[True, True, True], **t2,
                 error="grad_output must be float32[2, 2, 7, 7], got float32[2, 2, 5, 5]"),
        neg_case("aten.convolution_backward.default", In((2, 4, 6)), In((2, 3, 9)), In((4, 3, 3)),
                 bias_sizes=[4], output_mask=[True, True, True], **c1,
                 error="grad_output must be float32[2, 4, 7], got float32[2, 4, 6]"),
        neg_case("trainstep.conv2d_relu", In((2, 4, 5, 5)), In((4, 3, 3, 3)), None,
                 **dict(t2, stride=[2, 2], output_padding=[1, 1]),
                 error="transposed convolution has no fused relu form",
                 unsupported="a fused relu form of transposed convolution (the passes never make one)"),
        neg_case("aten.convolution.default", In((2, 3, 9, 9)), In((4, 3, 3)), None, **c2,
                 error="weight must be rank 4 (O, C/groups, kH, kW) for input float32[2, 3, 9, 9], "
                       "got float32[4, 3, 3]"),
    ]


def cases():
    return _conv1d() + _tconvs() + _negatives()
