"""The max-pool code pair that fuse_relu_backward makes from
relu -> max_pool2d_with_indices and its backward (windows that tile, and
windows that overlap, pad or dilate: torchvision's ResNet stem).

Oracle: the aten ops the pass replaces, run in torch. The whole backward
program (pool, grad, pool backward, le, where) runs unchanged in plain mode
and as the code pair in opt mode (expect_ops checks the pass fired); both
must equal torch. The forward also runs alone against torch's values and
the code derived from torch's indices (harness._ref_pool_code)."""
from .harness import Case, In, Node, Program, neg_case, op_case

CODE = "trainstep.max_pool2d_code"
CODE_BWD = "trainstep.max_pool2d_code_backward"


def _pool_attrs(k, stride=None, padding=0, dilation=1, ceil_mode=False):
    return dict(kernel_size=[k, k], stride=[stride, stride] if stride else [],
                padding=[padding, padding], dilation=[dilation, dilation], ceil_mode=ceil_mode)


# Windows that do not tile: (kernel, stride, padding, dilation, ceil_mode).
OVERLAP = [(3, 2, 1, 1, False), (3, 1, 1, 1, False), (2, 1, 0, 1, False), (3, 2, 1, 2, True),
           (2, 3, 1, 1, True)]


def _backward_program(x_shape, k, kind="normal", **geom):
    a = _pool_attrs(k, **geom)
    return Program(
        {"a": In(x_shape, kind=kind)},
        [Node("aten.relu.default", ["a"]),
         Node("aten.max_pool2d_with_indices.default", ["n0"], a),
         Node("aten.mul.Tensor", ["n1.0", "n1.0"]),  # a grad_output shaped like the pool output
         Node("aten.max_pool2d_with_indices_backward.default", ["n2", "n0", "n1.1"], a),
         Node("aten.le.Scalar", ["n0"], {"other": 0}),
         Node("trainstep.constant", [], {"dtype": "float32", "value": 0.0}),
         Node("aten.where.self", ["n4", "n5", "n3"])],
        outputs=["n1.0", "n6"])


def cases():
    out = []
    shapes = [((2, 3, 24, 24), 2), ((1, 2, 7, 9), 2), ((3, 5, 6), 3), ((1, 1, 5, 4), 1), ((2, 64, 12, 12), 2)]
    for shape, k in shapes:
        out.append(op_case(CODE, In(shape), **_pool_attrs(k)))
        for label in (CODE, CODE_BWD):
            out.append(Case(label, _backward_program(shape, k), expect_ops={"opt": [CODE, CODE_BWD]}))
    # Ties, exact zeros, NaN and -inf: the first max wins, NaN passes the relu.
    for x in (In((1, 2, 6, 6), kind="int", lo=-2, hi=3), In((1, 2, 6, 6), kind="special")):
        out.append(op_case(CODE, x, **_pool_attrs(2)))
    for label in (CODE, CODE_BWD):
        out.append(Case(label, _backward_program((1, 2, 6, 8), 2, kind="special"),
                        expect_ops={"opt": [CODE, CODE_BWD]}))
    # Overlapping, padded and dilated windows: where windows share an
    # element, its gradients add up.
    for k, s, p, d, c in OVERLAP:
        geom = dict(stride=s, padding=p, dilation=d, ceil_mode=c)
        out.append(op_case(CODE, In((2, 3, 9, 10)), **_pool_attrs(k, **geom)))
        for kind in ("normal", "special"):
            for label in (CODE, CODE_BWD):
                out.append(Case(label, _backward_program((2, 3, 9, 10), k, kind=kind, **geom),
                                expect_ops={"opt": [CODE, CODE_BWD]}))
    # A window of more than 128 elements has no byte code.
    out.append(neg_case(CODE, In((1, 1, 12, 12)), kernel_size=[12, 12], stride=[1, 1],
                        padding=[0, 0], dilation=[1, 1], ceil_mode=False,
                        error="windows of more than 128 elements do not fit a byte code",
                        unsupported="a compiler-made op without a torch counterpart"))
    return out
