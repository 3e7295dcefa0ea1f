"""The max-pool code pair that fuse_relu_backward makes from
relu -> max_pool2d_with_indices and its backward (windows that tile).

Oracle: the aten ops the pass replaces, run in torch. The whole backward
program (pool, grad, pool backward, le, where) runs unchanged in plain mode
and as the code pair in opt mode (expect_ops checks the pass fired); both
must equal torch. The forward also runs alone against torch's values and
the code derived from torch's indices (harness._ref_pool_code)."""
from .harness import Case, In, Node, Program, neg_case, op_case

CODE = "trainstep.max_pool2d_code"
CODE_BWD = "trainstep.max_pool2d_code_backward"


def _pool_attrs(k):
    return dict(kernel_size=[k, k], stride=[], padding=[0, 0], dilation=[1, 1], ceil_mode=False)


def _backward_program(x_shape, k, kind="normal"):
    a = _pool_attrs(k)
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
    # Overlapping windows have no byte code; the pass leaves them alone.
    out.append(neg_case(CODE, In((1, 1, 4, 4)), kernel_size=[2, 2], stride=[1, 1], padding=[0, 0],
                        dilation=[1, 1], ceil_mode=False,
                        error="needs windows that tile the input (kernel == stride, no padding or dilation)",
                        unsupported="a compiler-made op without a torch counterpart"))
    return out
