"""Oracle cases: native_layer_norm and native_layer_norm_backward
(src/ops/norm.cpp): one and several normalized dims, with and without
weight/bias, every output_mask, rows over the parallel threshold.
Statistics: ours sum in double, torch in float32 (pairwise), so outputs
agree to a few float32 ulps of the normalised values: tol 1e-5."""
from .harness import Case, In, Node, Program, neg_case, op_case

TOL = (1e-5, 1e-5)
TOL64 = (1e-11, 1e-11)  # the same sums, in a different order than torch's
D = "float64"
# (input shape, normalized_shape)
SHAPES = [((4, 8), [8]), ((2, 3, 16), [16]), ((2, 3, 4, 5), [4, 5]), ((5,), [5]),
          ((300, 128), [128]), ((3, 1), [1]), ((2, 64, 7), [64, 7])]


def _forward():
    out = []
    op = "aten.native_layer_norm.default"
    for s, ns in SHAPES:
        out.append(op_case(op, In(s), In(tuple(ns)), In(tuple(ns)), normalized_shape=ns, eps=1e-5, tol=TOL))
    out += [op_case(op, In((6, 10)), None, None, normalized_shape=[10], eps=1e-5, tol=TOL),
            op_case(op, In((6, 10)), In((10,)), None, normalized_shape=[10], eps=1e-3, tol=TOL),
            op_case(op, In((6, 10), kind="uniform", lo=100, hi=101), In((10,)), In((10,)),
                    normalized_shape=[10], eps=1e-5, tol=(1e-4, 1e-4)),  # mean >> spread: cancels in float32
            op_case(op, In((4, 8), kind="special"), In((8,)), In((8,)), normalized_shape=[8], eps=1e-5)]
    return out


def _backward():
    """The forward, a grad_output, then the backward with the forward's mean/rstd."""
    out = []
    op = "aten.native_layer_norm_backward.default"
    # Not normalized_shape [1]: there x - mean is 0, so every gradient but
    # the bias's is exactly 0; torch's float32 formula leaves ~1e-5 of noise.
    for (s, ns), affine in zip(SHAPES, (True, True, True, False, True, None, False)):
        if affine is None:
            continue
        for mask in ([True, True, True], [True, False, False], [False, True, True]):
            if not affine and mask != [True, False, False]:
                continue
            w = ["w", "b"] if affine else [None, None]
            ins = {"x": In(s), "g": In(s)}
            if affine:
                ins.update(w=In(tuple(ns)), b=In(tuple(ns)))
            out.append(Case(op, Program(ins, [
                Node("aten.native_layer_norm.default", ["x"] + w, {"normalized_shape": ns, "eps": 1e-5}),
                Node(op, ["g", "x", "n0.1", "n0.2"] + w,
                     {"normalized_shape": ns, "output_mask": mask})],
                outputs=[f"n1.{i}" for i in range(3) if mask[i]]), tol=(1e-4, 1e-5)))
    return out


def _float64():
    """float64: statistics in double as for float32, so close to torch's."""
    out = []
    op = "aten.native_layer_norm.default"
    for s, ns in (((4, 8), [8]), ((2, 3, 4, 5), [4, 5]), ((300, 128), [128])):
        out.append(op_case(op, In(s, D), In(tuple(ns), D), In(tuple(ns), D), normalized_shape=ns, eps=1e-5,
                           tol=TOL64))
    out.append(op_case(op, In((6, 10), D), None, None, normalized_shape=[10], eps=1e-5, tol=TOL64))
    bop = "aten.native_layer_norm_backward.default"
    for (s, ns), affine in ((((4, 8), [8]), True), (((300, 128), [128]), True), (((2, 3, 16), [16]), False)):
        for mask in ([True, True, True], [True, False, False]):
            if not affine and mask != [True, False, False]:
                continue
            w = ["w", "b"] if affine else [None, None]
            ins = {"x": In(s, D), "g": In(s, D)}
            if affine:
                ins.update(w=In(tuple(ns), D), b=In(tuple(ns), D))
            out.append(Case(bop, Program(ins, [
                Node(op, ["x"] + w, {"normalized_shape": ns, "eps": 1e-5}),
                Node(bop, ["g", "x", "n0.1", "n0.2"] + w, {"normalized_shape": ns, "output_mask": mask})],
                outputs=[f"n1.{i}" for i in range(3) if mask[i]]), tol=TOL64))
    return out


def _negatives():
    op = "aten.native_layer_norm.default"
    return [
        neg_case(op, In((3, 4)), In((5,)), In((5,)), normalized_shape=[5], eps=1e-5,
                 error="normalized_shape [5] is not the trailing shape of input float32[3, 4]"),
        neg_case(op, In((3, 4)), In((3,)), In((4,)), normalized_shape=[4], eps=1e-5,
                 error="weight float32[3] must be float32[4] for input float32[3, 4]"),
        neg_case(op, In((3, 4), D), In((4,)), In((4,), D), normalized_shape=[4], eps=1e-5,
                 error="weight float32[4] must be float64[4] for input float64[3, 4]"),
        neg_case("aten.native_layer_norm_backward.default", In((3, 4)), In((3, 4)), In((2, 1)), In((3, 1)),
                 In((4,)), In((4,)), normalized_shape=[4], output_mask=[True, True, True],
                 error="mean float32[2, 1] must hold 3 float32 values",
                 unsupported="torch does not check mean's size (it reads out of bounds)"),
    ]


def cases():
    return _forward() + _backward() + _float64() + _negatives()
