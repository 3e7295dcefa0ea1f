"""Oracle cases: convolution (+ backward, + the fused conv2d_relu), max
pooling (+ backward), mm / bmm / addmm and the pass-made trainstep.matmul
(src/ops/conv.cpp, pool.cpp, matmul.cpp)."""
from .harness import Case, In, Node, Program, neg_case, op_case, viewed

F, D, I = "float32", "float64", "int64"
# oneDNN and torch sum in different orders.
MM_TOL = (1e-4, 1e-4)
CONV_TOL = (1e-4, 1e-4)

# (input, weight, bias?, stride, padding, dilation, groups)
CONVS = [((2, 3, 9, 9), (4, 3, 3, 3), True, [1, 1], [0, 0], [1, 1], 1),
         ((2, 3, 9, 9), (4, 3, 3, 3), False, [2, 2], [1, 1], [1, 1], 1),
         ((1, 4, 10, 7), (6, 2, 3, 2), True, [1, 2], [2, 1], [1, 1], 2),
         ((2, 4, 8, 8), (4, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 4),  # depthwise
         ((1, 2, 11, 11), (3, 2, 3, 3), True, [1, 1], [0, 0], [2, 2], 1),  # dilated
         ((3, 5, 6, 6), (7, 5, 1, 1), True, [1, 1], [0, 0], [1, 1], 1),  # 1x1
         ((1, 1, 28, 28), (32, 1, 3, 3), True, [1, 1], [0, 0], [1, 1], 1),  # the MNIST CNN's conv1
         ((2, 3, 5, 5), (2, 3, 5, 5), True, [1, 1], [0, 0], [1, 1], 1)]  # output 1x1


def _conv_attrs(stride, padding, dilation, groups):
    return dict(stride=stride, padding=padding, dilation=dilation, transposed=False,
                output_padding=[0, 0], groups=groups)


def _convs(dt=F, tol=CONV_TOL):
    """dt float64: im2col + Gemm64 (src/ops/conv.cpp), plain layouts."""
    out = []
    for x, w, bias, st, pad, dil, g in CONVS:
        a = _conv_attrs(st, pad, dil, g)
        b = In((w[0],), dt) if bias else None
        out.append(op_case("aten.convolution.default", In(x, dt), In(w, dt), b, tol=tol, **a))
        out.append(op_case("trainstep.conv2d_relu", In(x, dt), In(w, dt), b, tol=tol, **a))
        # conv -> relu: with every pass on, fuse_conv_relu makes one conv2d_relu.
        out.append(Case("trainstep.conv2d_relu", Program(
            {"x": In(x, dt), "w": In(w, dt), **({"b": In((w[0],), dt)} if bias else {})},
            [Node("aten.convolution.default", ["x", "w", "b" if bias else None], a),
             Node("aten.relu.default", ["n0"])]), tol=tol,
            expect_ops={"opt": ["trainstep.conv2d_relu"]}))
        for mask in ([True, True, True], [True, False, False], [False, True, bias]):
            oh = (x[2] + 2 * pad[0] - dil[0] * (w[2] - 1) - 1) // st[0] + 1
            ow = (x[3] + 2 * pad[1] - dil[1] * (w[3] - 1) - 1) // st[1] + 1
            out.append(op_case("aten.convolution_backward.default", In((x[0], w[0], oh, ow), dt), In(x, dt), In(w, dt),
                               bias_sizes=[w[0]] if bias else None, output_mask=mask, tol=tol, **a))
        # relu -> conv, then the conv backward and relu's backward: with every
        # pass on, fuse_relu_backward makes one trainstep.conv_backward_relu.
        for mask in ([True, True, bias], [True, False, False]):
            out.append(Case("trainstep.conv_backward_relu", Program(
                {"a": In(x, dt), "w": In(w, dt), "dy": In((x[0], w[0], oh, ow), dt)},
                [Node("aten.relu.default", ["a"]),
                 Node("aten.convolution_backward.default", ["dy", "n0", "w"],
                      dict(bias_sizes=[w[0]] if bias else None, output_mask=mask, **a)),
                 Node("aten.le.Scalar", ["n0"], {"other": 0}),
                 Node("trainstep.constant", [], {"dtype": dt, "value": 0.0}),
                 Node("aten.where.self", ["n2", "n3", "n1.0"])],
                outputs=["n4"] + [f"n1.{j}" for j in (1, 2) if mask[j]]), tol=tol,
                expect_ops={"opt": ["trainstep.conv_backward_relu"]}))
    out.append(op_case("aten.convolution.default", In((2, 3, 9, 9), dt, kind="special"), In((4, 3, 3, 3), dt),
                       In((4,), dt), tol=tol, **_conv_attrs([1, 1], [0, 0], [1, 1], 1)))
    out.append(viewed("aten.permute.default", {"dims": [0, 3, 1, 2]}, "aten.convolution.default",
                      In((2, 8, 8, 3), dt), In((4, 3, 3, 3), dt), None, tol=tol,
                      **_conv_attrs([1, 1], [1, 1], [1, 1], 1)))
    return out


# (input, kernel, stride, padding, dilation, ceil_mode)
POOLS = [((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),
         ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], [1, 1], False),
         ((1, 2, 9, 7), [3, 2], [2, 1], [1, 0], [1, 1], True),
         ((2, 2, 10, 10), [2, 2], [], [0, 0], [1, 1], False),  # stride defaults to the kernel
         ((1, 1, 11, 11), [3, 3], [1, 1], [1, 1], [2, 2], False),
         ((3, 7, 7), [2, 2], [2, 2], [0, 0], [1, 1], True),  # unbatched
         ((64, 64, 24, 24), [2, 2], [2, 2], [0, 0], [1, 1], False)]  # the MNIST CNN's pool


def _pools():
    out = []
    for (x, k, st, pad, dil, ceil), dt in [(p, F) for p in POOLS] + [(p, D) for p in POOLS[:6]]:
        # float64: the general path and its backward (no code pair).
        a = dict(kernel_size=k, stride=st, padding=pad, dilation=dil, ceil_mode=ceil)
        out.append(op_case("aten.max_pool2d_with_indices.default", In(x, dt), **a))
        # backward takes the forward's indices: pool, a grad_output shaped
        # like its output, then the backward.
        out.append(Case("aten.max_pool2d_with_indices_backward.default", Program(
            {"x": In(x, dt)},
            [Node("aten.max_pool2d_with_indices.default", ["x"], a),
             Node("aten.mul.Tensor", ["n0.0", "n0.0"]),  # grad_output shaped like the pool output
             Node("aten.max_pool2d_with_indices_backward.default", ["n1", "x", "n0.1"], a)])))
    # float64 relu -> pool -> backward -> where: fuse_relu_backward leaves it
    # alone (the code pair is float32 only), so opt mode runs these ops too.
    a = dict(kernel_size=[2, 2], stride=[], padding=[0, 0], dilation=[1, 1], ceil_mode=False)
    out.append(Case("aten.max_pool2d_with_indices_backward.default", Program(
        {"a": In((2, 3, 8, 8), D, kind="special")},
        [Node("aten.relu.default", ["a"]),
         Node("aten.max_pool2d_with_indices.default", ["n0"], a),
         Node("aten.mul.Tensor", ["n1.0", "n1.0"]),
         Node("aten.max_pool2d_with_indices_backward.default", ["n2", "n0", "n1.1"], a),
         Node("aten.le.Scalar", ["n0"], {"other": 0}),
         Node("trainstep.constant", [], {"dtype": D, "value": 0.0}),
         Node("aten.where.self", ["n4", "n5", "n3"])],
        outputs=["n1.0", "n6"])))
    # Ties (integer-valued inputs): the first maximum wins; NaN counts as the maximum.
    a = dict(kernel_size=[2, 2], stride=[1, 1], padding=[0, 0], dilation=[1, 1], ceil_mode=False)
    out += [op_case("aten.max_pool2d_with_indices.default", In((1, 2, 6, 6), kind="int", lo=0, hi=3), **a),
            op_case("aten.max_pool2d_with_indices.default", In((1, 2, 6, 6), kind="special"), **a),
            viewed("aten.permute.default", {"dims": [0, 3, 1, 2]}, "aten.max_pool2d_with_indices.default",
                   In((2, 6, 6, 3)), **a)]
    return out


def _matmuls():
    out = []
    for m, k, n in ((3, 4, 5), (1, 7, 1), (64, 9216, 128), (130, 33, 67), (1, 1, 1), (5, 0, 3), (0, 4, 3)):
        # Long sums cancel: atol grows with sqrt(K).
        out.append(op_case("aten.mm.default", In((m, k)), In((k, n)), tol=(1e-4, 1e-5 * max(10, k ** 0.5))))
    for b, m, k, n in ((2, 3, 4, 5), (1, 7, 3, 1), (5, 16, 32, 8), (2, 3, 0, 4), (0, 2, 3, 4)):
        out.append(op_case("aten.bmm.default", In((b, m, k)), In((b, k, n)), tol=MM_TOL))
    for bias, beta, alpha in (((5,), 1, 1), ((3, 5), 0.5, 2.0), ((1, 5), 1, 1), ((3, 1), 1, 1), ((), 2, 1)):
        out.append(op_case("aten.addmm.default", In(bias), In((3, 4)), In((4, 5)), beta=beta, alpha=alpha,
                           tol=MM_TOL))
    # beta = 0: self is ignored, NaN and inf in it included (as in torch).
    out.append(op_case("aten.addmm.default", In((3, 5), kind="special"), In((3, 4)), In((4, 5)), beta=0,
                       alpha=1, tol=MM_TOL))
    # K = 9216 (the MNIST CNN's fc1): sums of 9216 products cancel; atol scales with sqrt(K).
    out.append(op_case("aten.addmm.default", In((128,)), In((64, 9216)), In((9216, 128)), tol=(1e-4, 1e-3)))
    out.append(op_case("aten.addmm.default", In((3, 1)), In((3, 0)), In((0, 5)), beta=0.5, alpha=2))  # K = 0
    out.append(op_case("trainstep.matmul", In((0, 3)), In((4, 0)), trans_a=True, trans_b=True))
    for ta in (False, True):
        for tb in (False, True):
            a = (4, 3) if ta else (3, 4)
            b = (5, 4) if tb else (4, 5)
            out.append(op_case("trainstep.matmul", In(a), In(b), trans_a=ta, trans_b=tb, tol=MM_TOL))
    # mm(t(x), y): fold_transpose reads x transposed in place (trainstep.matmul).
    out.append(Case("trainstep.matmul", Program(
        {"x": In((64, 10)), "y": In((64, 128))},
        [Node("aten.t.default", ["x"]), Node("aten.mm.default", ["n0", "y"])]), tol=MM_TOL,
        expect_ops={"opt": ["trainstep.matmul"]}))
    out.append(Case("trainstep.matmul", Program(
        {"x": In((10, 64)), "y": In((128, 64))},
        [Node("aten.t.default", ["y"]), Node("aten.mm.default", ["x", "n0"])]), tol=MM_TOL,
        expect_ops={"opt": ["trainstep.matmul"]}))
    out += [viewed("aten.t.default", {}, "aten.mm.default", In((4, 3)), In((4, 5)), tol=MM_TOL),
            viewed("aten.t.default", {}, "aten.mm.default", In((3, 4)), In((5, 4)), which=1, tol=MM_TOL),
            viewed("aten.transpose.int", {"dim0": 1, "dim1": 2}, "aten.bmm.default", In((2, 4, 3)),
                   In((2, 4, 5)), tol=MM_TOL)]
    return out + _matmuls_f64()


def _convs_f64():
    # float64 (im2col + Gemm64) against torch's float64 convolution: the same
    # shapes; both sum in double, in different orders.
    return _convs(D, (1e-11, 1e-12)) + [
        op_case("aten.convolution.default", In((2, 16, 12, 12), D), In((20, 16, 3, 3), D), In((20,), D),
                tol=(1e-11, 1e-12), **_conv_attrs([1, 1], [1, 1], [1, 1], 1)),  # over the GEMM's tiles
        op_case("aten.convolution_backward.default", In((2, 20, 12, 12), D), In((2, 16, 12, 12), D),
                In((20, 16, 3, 3), D), bias_sizes=[20], output_mask=[True, True, True], tol=(1e-11, 1e-11),
                **_conv_attrs([1, 1], [1, 1], [1, 1], 1))]


def _mm64_tol(k):
    # Gemm64 (src/ops/gemm64.cpp) and torch sum in different orders.
    return (1e-12, 1e-13 * max(10, k ** 0.5))


def _matmuls_f64():
    """float64 on Gemm64: sizes off the 6x16 micro-tile and the 256 K slice,
    K = 0, one size over the parallel threshold, transposed operands."""
    out = []
    for m, k, n in ((3, 4, 5), (1, 7, 1), (7, 300, 19), (37, 5, 33), (130, 260, 67), (1, 1, 1),
                    (5, 0, 3), (0, 4, 3), (4, 16, 64)):
        out.append(op_case("aten.mm.default", In((m, k), D), In((k, n), D), tol=_mm64_tol(k)))
    for b, m, k, n in ((2, 3, 4, 5), (3, 7, 13, 17), (2, 3, 0, 4), (4, 33, 20, 40)):
        out.append(op_case("aten.bmm.default", In((b, m, k), D), In((b, k, n), D), tol=_mm64_tol(k)))
    for bias, beta, alpha in (((17,), 1, 1), ((7, 17), 0.5, 2.0), ((1, 17), 1, 1), ((7, 1), 1, 1), ((), 2, 1)):
        out.append(op_case("aten.addmm.default", In(bias, D), In((7, 9), D), In((9, 17), D), beta=beta,
                           alpha=alpha, tol=_mm64_tol(9)))
    out.append(op_case("aten.addmm.default", In((7, 17), D, kind="special"), In((7, 9), D), In((9, 17), D),
                       beta=0, alpha=1, tol=_mm64_tol(9)))
    out.append(op_case("aten.addmm.default", In((3, 1), D), In((3, 0), D), In((0, 5), D), beta=0.5,
                       alpha=2))  # K = 0
    out.append(op_case("trainstep.matmul", In((0, 3), D), In((4, 0), D), trans_a=True, trans_b=True))
    for ta in (False, True):
        for tb in (False, True):
            m, k, n = 13, 270, 21
            a = (k, m) if ta else (m, k)
            b = (n, k) if tb else (k, n)
            out.append(op_case("trainstep.matmul", In(a, D), In(b, D), trans_a=ta, trans_b=tb,
                               tol=_mm64_tol(k)))
    out.append(Case("trainstep.matmul", Program(
        {"x": In((64, 10), D), "y": In((64, 130), D)},
        [Node("aten.t.default", ["x"]), Node("aten.mm.default", ["n0", "y"])]), tol=_mm64_tol(64),
        expect_ops={"opt": ["trainstep.matmul"]}))
    out.append(Case("trainstep.matmul", Program(
        {"x": In((10, 64), D), "y": In((130, 64), D)},
        [Node("aten.t.default", ["y"]), Node("aten.mm.default", ["x", "n0"])]), tol=_mm64_tol(64),
        expect_ops={"opt": ["trainstep.matmul"]}))
    out += [viewed("aten.t.default", {}, "aten.mm.default", In((4, 3), D), In((4, 5), D), tol=_mm64_tol(4)),
            viewed("aten.t.default", {}, "aten.mm.default", In((3, 4), D), In((5, 4), D), which=1,
                   tol=_mm64_tol(4))]
    return out


def _negatives():
    conv = _conv_attrs([1, 1], [0, 0], [1, 1], 1)
    return [
        neg_case("aten.convolution.default", In((2, 3, 9, 9)), In((4, 2, 3, 3)), None, **conv,
                 error="input has 3 channels but weight float32[4, 2, 3, 3] with groups=1 expects 2"),
        neg_case("aten.convolution.default", In((2, 3, 9, 9), D), In((4, 3, 3, 3)), None, **conv,
                 error="input and weight must both be float32, both float64 or both bfloat16, got input float64[2, 3, 9, 9] "
                       "and weight float32[4, 3, 3, 3]"),
        neg_case("aten.convolution.default", In((2, 3, 9, 9), D), In((4, 3, 3, 3), D), In((4,)), **conv,
                 error="bias must be float64[4], got float32[4]",
                 unsupported="a bias of another dtype than input and weight (torch converts it)"),
        neg_case("aten.convolution.default", In((2, 3, 2, 2)), In((4, 3, 3, 3)), None, **conv,
                 error="output size is not positive: input float32[2, 3, 2, 2], weight float32[4, 3, 3, 3], "
                       "padding 0x0, dilation 1x1 give output 0x0"),
        neg_case("aten.convolution.default", In((2, 3, 9, 9)), In((4, 3, 3, 3)), In((5,)), **conv,
                 error="bias must be float32[4], got float32[5]"),
        neg_case("trainstep.conv2d_relu", In((2, 3, 9, 9)), In((4, 3, 3, 3)), None,
                 **dict(conv, stride=[0, 1]), error="stride must be positive, got 0x1"),
        neg_case("aten.convolution_backward.default", In((2, 4, 6, 6)), In((2, 3, 9, 9)), In((4, 3, 3, 3)),
                 bias_sizes=[4], output_mask=[True, True, True], **conv,
                 error="grad_output must be float32[2, 4, 7, 7], got float32[2, 4, 6, 6]"),
        neg_case("aten.max_pool2d_with_indices.default", In((1, 2, 4, 4)), kernel_size=[3, 3], stride=[1, 1],
                 padding=[2, 2], dilation=[1, 1], ceil_mode=False,
                 error="padding must be between 0 and half the kernel size, got padding 2x2 for kernel 3x3"),
        neg_case("aten.max_pool2d_with_indices.default", In((2, 4, 4), I), kernel_size=[2, 2], stride=[2, 2],
                 padding=[0, 0], dilation=[1, 1], ceil_mode=False,
                 error="only float32, float64 and bfloat16 are supported, got int64[2, 4, 4]",
                 unsupported="integer pooling"),
        neg_case("aten.max_pool2d_with_indices_backward.default", In((1, 2, 3, 3)), In((1, 2, 4, 4)),
                 In((1, 2, 2, 2), I, lo=0, hi=16), kernel_size=[2, 2], stride=[2, 2], padding=[0, 0],
                 dilation=[1, 1], ceil_mode=False,
                 error="grad_output must be float32[1, 2, 2, 2], got float32[1, 2, 3, 3]"),
        neg_case("aten.mm.default", In((2, 3)), In((4, 5)), error="inner dimensions differ: [2, 3] @ [4, 5]"),
        neg_case("aten.mm.default", In((2, 3), I), In((3, 5), I),
                 error="self must be float32, float64 or bfloat16, got int64[2, 3]", unsupported="integer matmul"),
        neg_case("aten.mm.default", In((2, 3)), In((3, 5), D),
                 error="self and mat2 must have the same dtype, got float32[2, 3] and float64[3, 5]"),
        neg_case("aten.addmm.default", In((5,)), In((3, 4), D), In((4, 5), D), beta=1, alpha=1,
                 error="mat1 and self must have the same dtype, got float64[3, 4] and float32[5]"),
        neg_case("trainstep.matmul", In((3, 4), D), In((4, 5)), trans_a=False, trans_b=False,
                 error="a and b must have the same dtype, got float64[3, 4] and float32[4, 5]"),
        neg_case("aten.bmm.default", In((2, 3, 4)), In((3, 4, 5)), error="batch sizes differ: [2, 3, 4] and [3, 4, 5]"),
        neg_case("aten.addmm.default", In((4,)), In((3, 4)), In((4, 5)), beta=1, alpha=1,
                 error="self float32[4] is not broadcastable to [3, 5]"),
        neg_case("trainstep.matmul", In((3, 4)), In((3, 5)), trans_a=False, trans_b=False,
                 error="inner dimensions differ: a [3, 4] @ b [3, 5]"),
    ]


def _addmm_t():
    """trainstep.addmm: fold_transpose's addmm(self, op(mat1), op(mat2)), on
    each engine (float32's candidates, Gemm64), and the fold itself from
    nn.Linear's addmm(b, x, t(w)) (MNIST's fc1 shape)."""
    out = []
    for ta in (False, True):
        for tb in (False, True):
            a = (4, 3) if ta else (3, 4)
            b = (5, 4) if tb else (4, 5)
            for bias, beta, alpha in (((5,), 1, 1), ((3, 5), 0.5, 2.0), ((3, 1), 1, 1)):
                out.append(op_case("trainstep.addmm", In(bias), In(a), In(b), beta=beta, alpha=alpha,
                                   trans_a=ta, trans_b=tb, tol=MM_TOL))
            out.append(op_case("trainstep.addmm", In((5,), D), In(a, D), In(b, D), beta=1, alpha=1,
                               trans_a=ta, trans_b=tb, tol=_mm64_tol(4)))
    out.append(op_case("trainstep.addmm", In((3, 5), kind="special"), In((4, 3)), In((4, 5)), beta=0, alpha=1,
                       trans_a=True, trans_b=False, tol=MM_TOL))
    out.append(Case("trainstep.addmm", Program(
        {"b": In((128,)), "x": In((64, 9216)), "w": In((128, 9216))},
        [Node("aten.t.default", ["w"]), Node("aten.addmm.default", ["b", "x", "n0"], {"beta": 1, "alpha": 1})]),
        tol=(1e-4, 1e-3), expect_ops={"opt": ["trainstep.addmm"]}))
    return out


def cases():
    return _convs() + _convs_f64() + _pools() + _matmuls() + _negatives() + _addmm_t()
