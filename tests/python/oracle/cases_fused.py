"""Oracle cases: trainstep.fused_elementwise, written directly (member
lists) and made by the fusion pass from chains of pointwise nodes (the opt
mode must show the fused op). torch's reference runs each member's aten op."""
from .harness import Case, In, Node, Program, Scalar, neg_case, op_case

F, B, I = "float32", "bool", "int64"
FUSED = "trainstep.fused_elementwise"


def _m(op, args, **attrs):
    from .harness import full_attrs
    return {"name": op.split(".")[1], "op": op, "attrs": full_attrs(op, attrs), "args": args}


def _direct():
    mul_add_relu = [_m("aten.mul.Tensor", [["in", 0], ["in", 1]]),
                    _m("aten.add.Tensor", [["m", 0], ["in", 2]], alpha=1),
                    _m("aten.relu.default", [["m", 1]])]
    out = []
    for shape in ((7,), (3, 5), (129, 257), (1030,), ()):
        out.append(op_case(FUSED, In(shape), In(shape), In(shape), members=mul_add_relu, outputs=[2]))
    out.append(op_case(FUSED, In((3, 5)), In((3, 5)), In((3, 5)), members=mul_add_relu, outputs=[0, 2]))
    # A one-element input broadcasts; an immediate constant member; a bool
    # output (comparison) and a where over a bool input.
    members = [_m("trainstep.constant", [], value=0.5, dtype="float64", wrapped=True),
               _m("aten.mul.Tensor", [["in", 0], ["m", 0]]),
               _m("aten.sub.Tensor", [["m", 1], ["in", 1]], alpha=1),
               _m("aten.gt.Scalar", [["m", 2]], other=0.0),
               _m("aten.where.self", [["in", 2], ["m", 2], ["in", 0]]),
               _m("aten.exp.default", [["m", 4]])]
    out.append(op_case(FUSED, In((4, 6)), In(()), In((4, 6), B), members=members, outputs=[3, 5]))
    out.append(op_case(FUSED, In((2000,)), In((1,)), In((2000,), B), members=members, outputs=[5, 3]))
    members = [_m("aten.sigmoid.default", [["in", 0]]), _m("aten.tanh.default", [["in", 0]]),
               _m("aten.mul.Tensor", [["m", 0], ["m", 1]]), _m("aten.pow.Tensor_Scalar", [["m", 2]], exponent=2),
               _m("aten._to_copy.default", [["in", 1]], dtype="float32"),
               _m("aten.div.Tensor", [["m", 3], ["m", 4]])]
    out.append(op_case(FUSED, In((5, 7), kind="special"), In((5, 7), B), members=members, outputs=[5]))
    return out


def _chains():
    """Pointwise chains the fuse_elementwise pass groups (opt mode)."""
    out = []
    for shape in ((3, 5), (129, 257), (1025,)):
        out.append(Case(FUSED, Program(
            {"x": In(shape), "y": In(shape), "z": In(shape)},
            [Node("aten.mul.Tensor", ["x", "y"]), Node("aten.add.Tensor", ["n0", "z"]),
             Node("aten.relu.default", ["n1"]), Node("aten.sqrt.default", ["n2"])],
            outputs=["n1", "n3"]), expect_ops={"opt": [FUSED]}))
    # Adam-like update with wrapped scalars and a bool mask.
    out.append(Case(FUSED, Program(
        {"p": In((64, 10)), "g": In((64, 10)), "v": In((64, 10), kind="positive")},
        [Node("aten.mul.Tensor", ["v", Scalar(0.999)]), Node("aten.mul.Tensor", ["g", "g"]),
         Node("aten.add.Tensor", ["n0", "n1"], {"alpha": 0.001}), Node("aten.sqrt.default", ["n2"]),
         Node("aten.add.Tensor", ["n3", Scalar(1e-8)]), Node("aten.div.Tensor", ["g", "n4"]),
         Node("aten.sub.Tensor", ["p", "n5"], {"alpha": 0.01}), Node("aten.gt.Scalar", ["n6"], {"other": 0.0}),
         Node("aten.where.self", ["n7", "n6", "p"])],
        outputs=["n2", "n8"]), expect_ops={"opt": [FUSED]}))
    return out


def _negatives():
    return [
        neg_case(FUSED, In((3,)), members=[], outputs=[], error="attr members must be a non-empty list",
                 unsupported="no torch op"),
        neg_case(FUSED, In((3,)), members=[{"name": "x", "op": "aten.nope.default", "attrs": {},
                                            "args": [["in", 0]]}], outputs=[0],
                 error="member 0 (aten.nope.default): unknown op", unsupported="no torch op"),
        neg_case(FUSED, In((3,)), In((4,)),
                 members=[_m("aten.exp.default", [["in", 0]]), _m("aten.exp.default", [["in", 1]])],
                 outputs=[1], error="member 1 (aten.exp.default): shape [4] differs from the group's [3]",
                 unsupported="the pass never groups different shapes"),
        neg_case(FUSED, In((3,), I), members=[_m("aten.neg.default", [["in", 0]])], outputs=[0],
                 error="member 0 (aten.neg.default): no float32 tile form for these types",
                 unsupported="the pass only groups float32/bool"),
    ]


def cases():
    return _direct() + _chains() + _negatives()
