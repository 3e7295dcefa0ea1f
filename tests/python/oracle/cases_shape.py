"""Oracle cases: shape ops (src/ops/shape.cpp): the aliasing reshapes
(view, _unsafe_view, reshape, squeeze, unsqueeze) and the copying ones (t,
transpose, permute, expand, cat, slice, select), over every dtype; and
chains of them, which the compose_views pass makes one as_strided."""
from .harness import Case, In, Node, Program, neg_case, op_case, viewed

F, D, I, I32, U8, B = "float32", "float64", "int64", "int32", "uint8", "bool"
DTYPES = (F, I, B, D, U8)


def _reshapes():
    out = []
    for op in ("aten.view.default", "aten._unsafe_view.default"):
        out += [op_case(op, In((3, 4)), size=[12]), op_case(op, In((3, 4)), size=[2, -1, 3]),
                op_case(op, In((24,), I), size=[2, 3, 4]), op_case(op, In(()), size=[1, 1]),
                op_case(op, In((1,), B), size=[]), op_case(op, In((0, 4)), size=[-1, 2]),
                op_case(op, In((129, 257)), size=[-1]),
                # torch only views contiguous memory: a view after a permute
                # keeps the permute's leading dims together.
                viewed("aten.permute.default", {"dims": [1, 0, 2]}, op, In((2, 3, 4)), size=[3, 2, 2, 2])]
    op = "aten.reshape.default"
    out += [op_case(op, In((3, 4), dt), shape=[4, 3]) for dt in DTYPES]
    out += [op_case(op, In((2, 3, 4)), shape=[-1, 4]), op_case(op, In(()), shape=[1]),
            viewed("aten.t.default", {}, op, In((3, 5)), shape=[15])]
    op = "aten.unsqueeze.default"
    out += [op_case(op, In((3, 4), dt), dim=d) for dt in (F, I, B) for d in (0, 1, 2, -1, -3)]
    out += [op_case(op, In(()), dim=0), op_case(op, In(()), dim=-1)]
    op = "aten.squeeze.dim"
    out += [op_case(op, In(s, dt), dim=d) for dt in (F, I, B)
            for s, d in (((3, 1, 4), 1), ((3, 1, 4), 0), ((1, 4), -2), ((1,), 0))]
    out += [op_case(op, In(()), dim=0), op_case(op, In(()), dim=-1)]
    op = "aten.squeeze.dims"
    out += [op_case(op, In(s, dt), dim=d) for dt in (F, I, B)
            for s, d in (((3, 1, 4), [1]), ((1, 3, 1), [0, 2]), ((1, 4, 1), [-1, 1]), ((1,), [0]),
                         ((3, 4), []), ((1, 1), [0, -1]))]
    out += [op_case(op, In(()), dim=[0]), op_case(op, In(()), dim=[])]
    op = "aten.squeeze.default"
    out += [op_case(op, In(s, dt)) for dt in (F, I, B) for s in ((3, 1, 4), (1, 1), (1, 3, 1, 1, 2), ())]
    return out


def _transposes():
    out = []
    op = "aten.t.default"
    out += [op_case(op, In(s, dt)) for dt in DTYPES for s in ((3, 5), (7,), ())]
    out += [op_case(op, In((129, 257))), op_case(op, In((1, 9))), op_case(op, In((0, 3))),
            op_case(op, In((65, 33), I32))]
    op = "aten.transpose.int"
    out += [op_case(op, In((2, 3, 4), dt), dim0=0, dim1=2) for dt in DTYPES]
    out += [op_case(op, In((2, 3, 4)), dim0=-1, dim1=1), op_case(op, In((2, 3)), dim0=1, dim1=1),
            op_case(op, In((5, 33, 47)), dim0=1, dim1=2), op_case(op, In(()), dim0=0, dim1=-1),
            op_case(op, In((2, 3, 4, 5)), dim0=0, dim1=3)]
    op = "aten.permute.default"
    out += [op_case(op, In((2, 3, 4), dt), dims=[2, 0, 1]) for dt in DTYPES]
    out += [op_case(op, In((2, 3, 4, 5)), dims=[3, 1, 0, 2]), op_case(op, In((2, 3, 4)), dims=[-1, 0, 1]),
            op_case(op, In((64, 33, 47)), dims=[1, 2, 0]), op_case(op, In((3, 1, 4)), dims=[1, 0, 2]),
            op_case(op, In(()), dims=[]), op_case(op, In((5,)), dims=[0]),
            viewed("aten.t.default", {}, op, In((3, 4)), dims=[1, 0])]
    op = "aten.expand.default"
    out += [op_case(op, In((3, 1), dt), size=[3, 4]) for dt in DTYPES]
    out += [op_case(op, In((1, 4)), size=[2, 3, -1]), op_case(op, In(()), size=[2, 3]),
            op_case(op, In((3,)), size=[3]), op_case(op, In((1, 1)), size=[129, 257]),
            op_case(op, In((2, 1, 3)), size=[-1, 5, 3]), op_case(op, In((3, 1)), size=[0, 3, 4]),
            viewed("aten.t.default", {}, op, In((1, 3)), size=[2, 3, 4])]
    return out


def _cat():
    op = "aten.cat.default"
    out = [op_case(op, [In((2, 3), dt), In((4, 3), dt)], dim=0) for dt in DTYPES]
    out += [op_case(op, [In((2, 3)), In((2, 5)), In((2, 1))], dim=1),
            op_case(op, [In((2, 3, 4)), In((2, 1, 4))], dim=-2),
            op_case(op, [In((3,))], dim=0),
            op_case(op, [In((2, 3), I), In((2, 3), F)], dim=0),  # dtypes promote
            op_case(op, [In((2, 3), B), In((1, 3), U8, lo=0)], dim=0),
            op_case(op, [In((2, 3)), In((0,)), In((1, 3))], dim=0),  # legacy empty [0] skipped
            op_case(op, [In((0, 3)), In((2, 3))], dim=0),
            op_case(op, [In((129, 257)), In((129, 3))], dim=1),
            op_case(op, [In((5, 4)) for _ in range(7)], dim=0)]
    return out


def _slices():
    out = []
    op = "aten.slice.Tensor"
    for dt in DTYPES:
        out.append(op_case(op, In((6, 5), dt), dim=0, start=1, end=5, step=2))
    out += [op_case(op, In((6, 5)), dim=1, start=0, end=9223372036854775807, step=1),
            op_case(op, In((6, 5)), dim=1, start=None, end=None, step=3),
            op_case(op, In((6, 5)), dim=-1, start=-3, end=-1, step=1),
            op_case(op, In((6, 5)), dim=0, start=4, end=2, step=1),  # empty
            op_case(op, In((6, 5)), dim=0, start=-100, end=100, step=4),
            op_case(op, In((2, 9, 3)), dim=1, start=2, end=8, step=3),
            op_case(op, In((129, 257)), dim=1, start=1, end=256, step=1),
            viewed("aten.t.default", {}, op, In((5, 6)), dim=1, start=1, end=4, step=1)]
    op = "aten.select.int"
    out += [op_case(op, In((4, 5), dt), dim=1, index=2) for dt in DTYPES]
    out += [op_case(op, In((4, 5)), dim=0, index=-1), op_case(op, In((2, 3, 4)), dim=-2, index=0),
            op_case(op, In((7,)), dim=0, index=3), op_case(op, In((129, 257)), dim=1, index=200),
            viewed("aten.permute.default", {"dims": [2, 0, 1]}, op, In((2, 3, 4)), dim=0, index=1)]
    return out


def _negatives():
    return [
        neg_case("aten.view.default", In((3, 4)), size=[5, -1], error="shape [5, -1] is invalid for input of size 12"),
        neg_case("aten.view.default", In((3, 4)), size=[-1, -1], error="only one dimension of size may be -1"),
        neg_case("aten._unsafe_view.default", In((3, 4)), size=[13], error="shape [13] is invalid for input of size 12"),
        neg_case("aten.reshape.default", In((3, 4)), shape=[2, -2, 3], error="invalid size [2, -2, 3]"),
        neg_case("aten.unsqueeze.default", In((3, 4)), dim=3, error="dim 3 is out of range for a tensor of rank 3"),
        neg_case("aten.squeeze.dims", In((1, 1)), dim=[0, -2],
                 error="dim 0 appears multiple times in the list of dims"),
        neg_case("aten.squeeze.dims", In((1, 4)), dim=[2], error="dim 2 is out of range for a tensor of rank 2"),
        neg_case("aten.squeeze.dim", In((3, 4)), dim=2, error="dim 2 is out of range for a tensor of rank 2"),
        neg_case("aten.t.default", In((2, 3, 4)), error="t() expects a tensor of rank <= 2, got float32[2, 3, 4]"),
        neg_case("aten.transpose.int", In((2, 3)), dim0=0, dim1=2, error="dim 2 is out of range for a tensor of rank 2"),
        neg_case("aten.permute.default", In((2, 3)), dims=[0], error="permute dims [0] do not match rank 2"),
        neg_case("aten.permute.default", In((2, 3)), dims=[1, -1], error="permute dims [1, -1] repeat a dim"),
        neg_case("aten.expand.default", In((3, 2)), size=[3, 4], error="cannot expand float32[3, 2] to size [3, 4]"),
        neg_case("aten.expand.default", In((3, 2)), size=[2], error="expand size [2] has fewer dims than float32[3, 2]"),
        neg_case("aten.expand.default", In((3,)), size=[-1, 3],
                 error="expand size [-1, 3]: -1 is not allowed for a new dim"),
        neg_case("aten.cat.default", [In((2, 3)), In((2, 4))], dim=0,
                 error="cat inputs float32[2, 3] and float32[2, 4] differ outside dim 0"),
        neg_case("aten.cat.default", [In(()), In(())], dim=0, error="zero-dimensional tensors cannot be concatenated"),
        neg_case("aten.slice.Tensor", In((4, 5)), dim=0, start=0, end=2, step=0,
                 error="slice step must be positive, got 0"),
        neg_case("aten.slice.Tensor", In(()), dim=0, start=0, end=1, step=1, error="slice of a 0-d tensor"),
        neg_case("aten.select.int", In((4, 5)), dim=1, index=5,
                 error="index 5 is out of range for dim 1 of size 5"),
        neg_case("aten.select.int", In(()), dim=0, index=0, error="select of a 0-d tensor"),
    ]


def _seq_ops():
    """as_strided (functionalize's split), stack, unbind, unsafe_split (an
    LSTM's gates and time steps)."""
    out = []
    op = "aten.as_strided.default"
    out += [op_case(op, In((2, 6), dt), size=[2, 2], stride=[6, 1], storage_offset=k)
            for dt in DTYPES for k in (0, 2, 4)]
    out += [op_case(op, In((4, 5, 24)), size=[4, 5, 8], stride=[120, 24, 1], storage_offset=16),
            op_case(op, In((12,)), size=[3, 4], stride=[1, 3]),  # a transposed read
            op_case(op, In((6,)), size=[3, 2], stride=[1, 1], storage_offset=1),  # overlapping
            op_case(op, In((3, 4)), size=[], stride=[], storage_offset=5),
            op_case(op, In((64, 32, 384)), size=[64, 32, 128], stride=[12288, 384, 1], storage_offset=256)]
    op = "aten.stack.default"
    out += [op_case(op, [In((2, 3), dt), In((2, 3), dt)], dim=0) for dt in DTYPES]
    out += [op_case(op, [In((2, 3)) for _ in range(4)], dim=1),
            op_case(op, [In((2, 3)), In((2, 3))], dim=-1),
            op_case(op, [In(()), In(())], dim=0),
            op_case(op, [In((3,))], dim=0),
            op_case(op, [In((2, 3), I), In((2, 3), F)], dim=0),
            op_case(op, [In((32, 256)) for _ in range(16)], dim=1)]
    op = "aten.unbind.int"
    out += [op_case(op, In((3, 4), dt), dim=d) for dt in (F, I, B) for d in (0, 1, -1)]
    out += [op_case(op, In((16, 5, 7)), dim=1), op_case(op, In((1, 3)), dim=0)]
    op = "aten.unsafe_split.Tensor"
    out += [op_case(op, In((3, 8), dt), split_size=2, dim=1) for dt in (F, I, B)]
    out += [op_case(op, In((3, 7)), split_size=3, dim=1),  # the last piece shorter
            op_case(op, In((5, 4)), split_size=2, dim=0), op_case(op, In((5, 4)), split_size=9, dim=0),
            op_case(op, In((32, 1024)), split_size=256, dim=1), op_case(op, In((0, 4)), split_size=2, dim=0)]
    op = "aten.slice_scatter.default"
    out += [op_case(op, In((4, 6), dt), In((4, 2), dt), dim=1, start=1, end=3, step=1) for dt in DTYPES]
    out += [op_case(op, In((6, 5)), In((2, 5)), dim=0, start=1, end=6, step=3),
            op_case(op, In((2, 72)), In((2, 24)), dim=1, start=0, end=24, step=1),
            op_case(op, In((3, 4)), In((3, 4)), dim=0, start=0, end=9223372036854775807, step=1),
            op_case(op, In((3, 4)), In((3, 0)), dim=1, start=2, end=2, step=1),
            op_case(op, In((2, 3, 8)), In((2, 3, 2)), dim=-1, start=-4, end=-2, step=1)]
    op = "aten.split_with_sizes.default"
    out += [op_case(op, In((3, 8), dt), split_sizes=[2, 6], dim=1) for dt in (F, I, B)]
    out += [op_case(op, In((784 + 40, 5)), split_sizes=[784, 20, 20], dim=0),
            op_case(op, In((4, 6)), split_sizes=[0, 6, 0], dim=-1),
            op_case(op, In((2, 3, 96)), split_sizes=[32, 32, 32], dim=2),
            op_case(op, In((5,)), split_sizes=[5], dim=0)]
    return out


def _seq_negatives():
    return [
        neg_case("aten.as_strided.default", In((2, 6)), size=[2, 2], stride=[6, 1], storage_offset=5,
                 error="size [2, 2], stride [6, 1], offset 5 reads element 12 of float32[2, 6]"),
        neg_case("aten.stack.default", [In((2, 3)), In((3, 2))], dim=0,
                 error="stack inputs float32[2, 3] and float32[3, 2] differ in shape"),
        neg_case("aten.unbind.int", In(()), dim=0, error="cannot split a 0-d tensor"),
        neg_case("aten.unsafe_split.Tensor", In((3, 4)), split_size=0, dim=1,
                 error="split_size must be positive, got 0"),
        neg_case("aten.slice_scatter.default", In((3, 4)), In((3, 3)), dim=1, start=0, end=2, step=1,
                 error="src is float32[3, 3], the slice is float32[3, 2]"),
        neg_case("aten.split_with_sizes.default", In((3, 4)), split_sizes=[1, 2], dim=1,
                 error="split_sizes [1, 2] add up to 3, not dim 1's size 4"),
        neg_case("aten.split_with_sizes.default", In((3, 4)), split_sizes=[5, -1], dim=1,
                 error="split_sizes [5, -1] holds a negative size"),
    ]


def _chain(op, x, nodes, expect=("aten.as_strided.default",)):
    """nodes applied in turn to x (each reads the one before): with every
    pass on, compose_views makes the copies among them one as_strided.
    (torch's clone keeps a permuted tensor's strides, so the chains reshape
    where our graphs, all contiguous, view.)"""
    return Case(op, Program({"x": x}, [Node(o, ["x" if k == 0 else f"n{k - 1}"], a)
                                       for k, (o, a) in enumerate(nodes)]),
                expect_ops={"opt": list(expect)})


def _view_chains():
    AS, V, T, E, C = ("aten.as_strided.default", "aten.view.default", "aten.transpose.int",
                      "aten.expand.default", "aten.clone.default")
    P, R = "aten.permute.default", "aten.reshape.default"
    return [
        # A transformer's head split: q of a fused qkv, heads to dim 1.
        _chain(AS, In((2, 8, 24)), [(AS, {"size": [2, 8, 8], "stride": [192, 24, 1],
                                          "storage_offset": 8}),
                                    (V, {"size": [2, 8, 2, 4]}), (T, {"dim0": 1, "dim1": 2}),
                                    (E, {"size": [2, 2, 8, 4]}), (C, {}), (R, {"shape": [4, 8, 4]})]),
        # ... and k transposed twice, int64.
        _chain(T, In((2, 8, 24), I), [(AS, {"size": [2, 8, 8], "stride": [192, 24, 1],
                                            "storage_offset": 16}),
                                      (V, {"size": [2, 8, 2, 4]}), (T, {"dim0": 1, "dim1": 2}),
                                      (T, {"dim0": -2, "dim1": -1}), (C, {})]),
        # The heads merged back: transpose, clone, view.
        _chain(T, In((2, 2, 8, 4)), [(T, {"dim0": 1, "dim1": 2}), (C, {}), (R, {"shape": [2, 8, 8]})]),
        # A broadcast dim (stride 0) under a permute, then copies of it.
        _chain(E, In((3, 1, 5)), [(P, {"dims": [2, 0, 1]}), (E, {"size": [5, 3, 4]}), (C, {}),
                                  (T, {"dim0": 0, "dim1": 2})]),
        # A reshape strides cannot express (merging transposed dims): the
        # chain starts again after it; bool.
        _chain(R, In((4, 6), B), [("aten.t.default", {}), (R, {"shape": [3, 8]}),
                                  ("aten.t.default", {}), (E, {"size": [2, 8, 3]}), (C, {})],
               expect=("aten.t.default",)),
        # An expand to the same shape and a clone: the input itself.
        _chain(E, In((3, 4)), [(E, {"size": [3, 4]}), (C, {}), ("aten.neg.default", {})],
               expect=("aten.neg.default",)),
    ]


def cases():
    return (_reshapes() + _transposes() + _cat() + _slices() + _negatives() + _seq_ops()
            + _seq_negatives() + _view_chains())
