"""Oracle cases: _softmax, _log_softmax and their backward
(src/ops/softmax.cpp): every dim, [O, R, I] with I > 1, masked (-inf)
entries, NaN/inf, float64, a size over the parallel threshold."""
from .harness import Case, In, Node, Program, neg_case, op_case

F, D = "float32", "float64"
SHAPES = [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1), ((2, 3, 4), 1), ((4, 1, 6), 1),
          ((129, 257), -1), ((257, 129), 0), ((), 0)]


def _forward():
    out = []
    for op in ("aten._softmax.default", "aten._log_softmax.default"):
        out += [op_case(op, In(s, kind="uniform", lo=-8, hi=8), dim=d, half_to_float=False)
                for s, d in SHAPES]
        out += [op_case(op, In((3, 5), D), dim=1, half_to_float=False),
                op_case(op, In((4, 6), kind="special"), dim=1, half_to_float=False),
                op_case(op, In((2, 4), kind="uniform", lo=80, hi=100), dim=1, half_to_float=False),
                op_case(op, In((2, 5), kind="values", values=[
                    [0.5, float("-inf"), float("-inf"), 1.0, 2.0],
                    [float("-inf"), -1.0, 3.0, float("-inf"), 0.0]]), dim=1, half_to_float=False),
                # the transformer's causal mask: key after query -> -inf, then softmax
                Case(op, Program({"x": In((2, 5, 5))}, [
                    Node("aten.arange.default", [], {"end": 5}),
                    Node("aten.unsqueeze.default", ["n0"], {"dim": 0}),
                    Node("aten.unsqueeze.default", ["n0"], {"dim": 1}),
                    Node("aten.gt.Tensor", ["n1", "n2"]),
                    Node("aten.masked_fill.Scalar", ["x", "n3"], {"value": "-inf"}),
                    Node(op, ["n4"], {"dim": -1, "half_to_float": False})]))]
    return out


def _backward():
    """grad_output and the forward's output: softmax, a grad, the backward."""
    out = []
    for fwd, bwd in (("aten._softmax.default", "aten._softmax_backward_data.default"),
                     ("aten._log_softmax.default", "aten._log_softmax_backward_data.default")):
        for s, d in SHAPES[:-1]:
            out.append(Case(bwd, Program(
                {"x": In(s, kind="uniform", lo=-4, hi=4), "g": In(s)},
                [Node(fwd, ["x"], {"dim": d, "half_to_float": False}),
                 Node(bwd, ["g", "n0"], {"dim": d, "input_dtype": "float32"})]), tol=(1e-5, 1e-6)))
        out += [op_case(bwd, In((3, 5), D), In((3, 5), D, kind="uniform", lo=-2, hi=0), dim=1,
                        input_dtype="float64"),
                op_case(bwd, In((2, 3, 4)), In((2, 3, 4), kind="uniform", lo=-2, hi=0), dim=0,
                        input_dtype="float32", tol=(1e-5, 1e-6))]
    return out


def _negatives():
    return [
        neg_case("aten._softmax.default", In((2, 3)), dim=2, half_to_float=False,
                 error="dim 2 is out of range for a tensor of rank 2"),
        neg_case("aten._log_softmax.default", In((2, 3), "int64"), dim=1, half_to_float=False,
                 error="input 0 must be float32, float64 or bfloat16, got int64[2, 3]"),
        neg_case("aten._softmax.default", In((2, 3)), dim=1, half_to_float=True,
                 error="half_to_float needs a float16 input"),
        neg_case("aten._softmax_backward_data.default", In((2, 3)), In((3, 2)), dim=1,
                 input_dtype="float32", error="output float32[3, 2] must match grad_output float32[2, 3]",
                 unsupported="torch does not check the shapes here (it reads out of bounds)"),
    ]


def cases():
    return _forward() + _backward() + _negatives()
