"""Oracle cases: native_batch_norm and its backward (src/ops/batch_norm.cpp).
Training mode takes no running stats (the exporter updates them in the
graph, python/trainstep/patches.py); eval mode takes them."""
from .harness import Case, In, Node, Program, Scalar, neg_case, op_case

F, D = "float32", "float64"
TOL64 = (1e-11, 1e-11)
# Per-channel sums over N*S elements: double accumulation vs torch's order.
TOL = (1e-5, 1e-5)
SHAPES = [(4, 3), (6, 3, 5), (2, 3, 4, 5), (2, 3, 2, 2, 2), (5, 1, 7, 7),
          (64, 16, 9, 9)]  # the last: channels in parallel


def _fwd(shape, affine, training, x=None, dt=F, **kw):
    c = shape[1]
    w, b = (In((c,), dt, kind="uniform", lo=0.5, hi=1.5), In((c,), dt)) if affine else (None, None)
    rm, rv = (None, None) if training else (In((c,), dt), In((c,), dt, kind="positive"))
    return op_case("aten.native_batch_norm.default", x or In(shape, dt), w, b, rm, rv,
                   training=training, momentum=0.1, eps=1e-5, tol=kw.pop("tol", TOL), **kw)


def _fwd_relu(shape, affine, training, dt=F, tol=TOL):
    """trainstep.batch_norm_relu itself, and batch norm -> relu, which with
    every pass on fuse_conv_relu folds into one (the saves stay outputs)."""
    c = shape[1]
    ins = {"x": In(shape, dt, kind="special")}
    if affine:
        ins["w"], ins["b"] = In((c,), dt, kind="uniform", lo=0.5, hi=1.5), In((c,), dt)
    if not training:
        ins["rm"], ins["rv"] = In((c,), dt), In((c,), dt, kind="positive")
    refs = ["x", "w" if affine else None, "b" if affine else None] + (
        [None, None] if training else ["rm", "rv"])
    fa = dict(training=training, momentum=0.1, eps=1e-5)
    return [Case("trainstep.batch_norm_relu", Program(ins, [Node("trainstep.batch_norm_relu", refs, fa)]),
                 tol=tol),
            Case("trainstep.batch_norm_relu", Program(ins, [
                Node("aten.native_batch_norm.default", refs, fa), Node("aten.relu.default", ["n0.0"])],
                outputs=["n1", "n0.1", "n0.2"]), tol=tol,
                expect_ops={"opt": ["trainstep.batch_norm_relu"]})]


def _bwd(shape, affine, train, mask, dt=F, tol=(1e-4, 1e-4)):
    """forward, a grad_output shaped like its output, then the backward on
    the forward's saved statistics (train) or the running stats (eval)."""
    c = shape[1]
    ins = {"x": In(shape, dt)}
    if affine:
        ins["w"] = In((c,), dt, kind="uniform", lo=0.5, hi=1.5)
        ins["b"] = In((c,), dt)
    if not train:
        ins["rm"], ins["rv"] = In((c,), dt), In((c,), dt, kind="positive")
    w = "w" if affine else None
    rm, rv = (None, None) if train else ("rm", "rv")
    fa = dict(training=train, momentum=0.1, eps=1e-5)
    ba = dict(train=train, eps=1e-5, output_mask=mask)
    return Case("aten.native_batch_norm_backward.default", Program(ins, [
        Node("aten.native_batch_norm.default", ["x", w, "b" if affine else None, rm, rv], fa),
        Node("aten.mul.Tensor", ["n0.0", "n0.0"]),
        Node("aten.native_batch_norm_backward.default", ["n1", "x", w, rm, rv, "n0.1", "n0.2"], ba)]),
        tol=tol)


EPI, PRO = "trainstep.batch_norm_epilogue", "trainstep.batch_norm_backward_prologue"


def _m(op, args, **attrs):
    from .harness import full_attrs
    return {"name": op.split(".")[1], "op": op, "attrs": full_attrs(op, attrs), "args": args}


# Group programs as fuse_elementwise writes them: SiLU times a 0-d scale
# (input 1); the gradient g * sigmoid(y) (g: input 1).
SILU = [_m("aten.sigmoid.default", [["in", 0]]), _m("aten.mul.Tensor", [["in", 0], ["m", 0]]),
        _m("aten.mul.Tensor", [["m", 1], ["in", 1]])]
GRAD = [_m("aten.sigmoid.default", [["in", 0]]), _m("aten.mul.Tensor", [["in", 1], ["m", 0]])]


def _groups():
    """The fused forms (fuse_batch_norm_groups), direct and made by the pass
    from batch norm -> hardswish and hardswish's backward -> batch norm
    backward (opt mode; float32, plain and, at (8, 16, 6, 6), blocked when a
    convolution makes x)."""
    out = []
    for shape, training in (((2, 3, 4, 5), True), ((4, 16, 6, 6), False), ((64, 16, 9, 9), True)):
        c = shape[1]
        w, b = In((c,), kind="uniform", lo=0.5, hi=1.5), In((c,))
        rm, rv = (None, None) if training else (In((c,)), In((c,), kind="positive"))
        out.append(op_case(EPI, In(shape), w, b, rm, rv, In(()), training=training, momentum=0.1,
                           eps=1e-5, members=SILU, outputs=[2], tol=TOL))
        sm, si = (In((c,)), In((c,), kind="positive")) if training else (None, None)
        out.append(op_case(PRO, In((2, c), kind="uniform", lo=0.5, hi=1.5), In(shape), w, rm, rv, sm, si,
                           In(shape), train=training, eps=1e-5, output_mask=[True, True, True],
                           members=GRAD, outputs=[1], tol=(1e-4, 1e-4)))
    conv = dict(stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False,
                output_padding=[0, 0], groups=1)
    for shape, training, by_conv in (((2, 3, 4, 5), True, False), ((8, 16, 6, 6), True, True),
                                     ((8, 16, 6, 6), False, True)):
        c = shape[1]
        ins = {"x": In(shape), "w": In((c,), kind="uniform", lo=0.5, hi=1.5), "b": In((c,)),
               "g": In(shape)}
        if not training:
            ins["rm"], ins["rv"] = In((c,)), In((c,), kind="positive")
        nodes, x = [], "x"
        if by_conv:
            ins["k"] = In((c, c, 1, 1))
            nodes.append(Node("aten.convolution.default", ["x", "k", None], conv))
            x = "n0"
        i = len(nodes)
        rs = [None, None] if training else ["rm", "rv"]
        nodes += [
            Node("aten.native_batch_norm.default", [x, "w", "b"] + rs,
                 dict(training=training, momentum=0.1, eps=1e-5)),
            Node("aten.add.Tensor", [f"n{i}.0", Scalar(3)], {"alpha": 1}),
            Node("aten.clamp.default", [f"n{i + 1}"], {"min": 0, "max": 6}),
            Node("aten.mul.Tensor", [f"n{i}.0", f"n{i + 2}"]),
            Node("aten.div.Tensor", [f"n{i + 3}", Scalar(6)]),
            Node("aten.lt.Scalar", [f"n{i}.0"], {"other": 3}),
            Node("aten.mul.Tensor", ["g", f"n{i}.0"]),
            Node("aten.where.self", [f"n{i + 5}", f"n{i + 6}", "g"]),
            Node("aten.native_batch_norm_backward.default",
                 [f"n{i + 7}", x, "w"] + rs + ([f"n{i}.1", f"n{i}.2"] if training else [None, None]),
                 dict(train=training, eps=1e-5, output_mask=[True, True, True]))]
        outs = [f"n{i + 4}", f"n{i + 8}.0", f"n{i + 8}.1", f"n{i + 8}.2"]
        if by_conv:  # blocked only where no output is x's set: convolve the results
            nodes += [Node("aten.convolution.default", [f"n{i + 4}", "k", None], conv),
                      Node("aten.convolution.default", [f"n{i + 8}.0", "k", None], conv)]
            outs = [f"n{i + 9}", f"n{i + 10}", f"n{i + 8}.1", f"n{i + 8}.2"]
        out.append(Case(EPI, Program(ins, nodes, outputs=outs), tol=(1e-4, 1e-4),
                        expect_ops={"opt": [EPI, PRO]}))
    out.append(neg_case(EPI, In((4, 3), "float64"), None, None, None, None, In(()), training=True,
                        momentum=0.1, eps=1e-5, members=SILU, outputs=[2],
                        error="input 0 is float64[4, 3]; these fused forms are float32 only",
                        unsupported="the pass fuses float32 batch norms only"))
    return out


def cases():
    out = _groups()
    for s in SHAPES:
        out += [_fwd(s, True, True), _fwd(s, False, True), _fwd(s, True, False)]
    out.append(_fwd((3, 2), True, False))  # eval needs no more than one value per channel
    # |mean| / std ~ 870: the variance survives (shifted double sums); the
    # output's atol is ulp(1000) = 6e-5 (y = x * alpha + beta rounds beta).
    out.append(_fwd((16, 4, 6, 6), True, True, x=In((16, 4, 6, 6), kind="uniform", lo=998, hi=1002),
                    tol=(1e-5, 2e-4)))
    for s in ((4, 3), (2, 3, 4, 5), (64, 16, 9, 9)):
        for mask in ([True, True, True], [True, False, False], [False, True, True]):
            out.append(_bwd(s, True, True, mask))
        out += [_bwd(s, False, True, [True, False, False]), _bwd(s, True, False, [True, True, True])]
    # float64: the plain kernels, statistics in double as for float32.
    for s in ((4, 3), (2, 3, 4, 5), (64, 16, 9, 9)):
        out += [_fwd(s, True, True, dt=D, tol=TOL64), _fwd(s, False, True, dt=D, tol=TOL64),
                _fwd(s, True, False, dt=D, tol=TOL64),
                _bwd(s, True, True, [True, True, True], dt=D, tol=TOL64),
                _bwd(s, True, False, [True, True, True], dt=D, tol=TOL64)]
    # relu folded in (NaN, infinities and zeros in the input: in training
    # they make whole channels NaN).
    for s in ((2, 16, 4, 5), (6, 3, 5)):
        for affine, training in ((True, True), (False, True), (True, False)):
            out += _fwd_relu(s, affine, training)
        out += _fwd_relu(s, True, False, dt=D, tol=TOL64)
    c = 3
    out += [
        neg_case("aten.native_batch_norm.default", In((4, c)), In((c,)), In((c,)), In((c,)), In((c,)),
                 training=True, momentum=0.1, eps=1e-5,
                 error="training mode with running stats would update them in place; the exporter "
                       "passes none and updates them in the graph",
                 unsupported="torch updates the running stats in place; a functional graph cannot"),
        neg_case("aten.native_batch_norm.default", In((4, c)), In((c + 1,)), None, None, None,
                 training=True, momentum=0.1, eps=1e-5,
                 error="weight must be float32[3] for input float32[4, 3], got float32[4]",
                 unsupported="torch's CPU kernel reads the first C weights of a longer tensor"),
        neg_case("aten.native_batch_norm.default", In((1, c, 1)), None, None, None, None,
                 training=True, momentum=0.1, eps=1e-5,
                 types=[{"dtype": F, "shape": [1, 3, 1]}, {"dtype": F, "shape": [3]},
                        {"dtype": F, "shape": [3]}],
                 error="training mode needs more than 1 value per channel, got input float32[1, 3, 1]",
                 unsupported="torch's op gives NaN/inf statistics; F.batch_norm refuses it first"),
        neg_case("aten.native_batch_norm.default", In((4, c), D), In((c,)), None, None, None,
                 training=True, momentum=0.1, eps=1e-5,
                 error="weight must be float64[3] for input float64[4, 3], got float32[3]",
                 unsupported="torch's CPU kernel converts a weight of another dtype"),
        neg_case("aten.native_batch_norm_backward.default", In((4, 2)), In((4, c)), None, None, None,
                 In((c,)), In((c,), kind="positive"), train=True, eps=1e-5,
                 output_mask=[True, True, True],
                 error="grad_out float32[4, 2] must match input float32[4, 3]",
                 unsupported="torch reads grad_out as if it had the input's shape"),
        neg_case("aten.native_batch_norm_backward.default", In((4, c)), In((4, c)), None, None, None,
                 In((c,)), In((c,), kind="positive"), train=True, eps=1e-5, output_mask=[True, True],
                 types=[{"dtype": F, "shape": [4, 3]}, {"dtype": F, "shape": [3]},
                        {"dtype": F, "shape": [3]}],
                 error="attribute 'output_mask' must have 3 bools, got 2"),
    ]
    return out
