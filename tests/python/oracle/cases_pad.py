"""Oracle cases: padding ops (src/ops/pad.cpp): constant_pad_nd over every
dtype and rank, with negative (cropping) pads as its autograd backward
uses; reflection and replication pads (1d, 2d, with and without the batch
dim) and their backward ops, float32 and float64."""
from .harness import In, neg_case, op_case, viewed

F, D, I, I32, U8, B = "float32", "float64", "int64", "int32", "uint8", "bool"

# A value each dtype takes (cast as torch's fill_ casts it).
VALUES = {F: 1.5, D: -2.25, I: 2.7, I32: 7, U8: -1, B: 0.5}


def _constant():
    op = "aten.constant_pad_nd.default"
    out = [op_case(op, In((3, 4), dt), pad=[1, 2, 0, 1], value=v) for dt, v in VALUES.items()]
    out += [op_case(op, In((5,), dt), pad=[-1, 2], value=3) for dt in (F, I, U8, B)]
    out += [op_case(op, In(()), pad=[], value=1.0),
            op_case(op, In((7,)), pad=[2, 3]),  # value left at its default 0
            op_case(op, In((2, 3, 5)), pad=[1, 2], value=-1.0),
            op_case(op, In((2, 3, 5)), pad=[1, 2, -1, 0], value=0.5),
            op_case(op, In((2, 3, 4, 5)), pad=[1, 0, 0, 2, 1, 1, 2, 0], value=9.0),
            op_case(op, In((2, 3, 4, 5)), pad=[-1, 2, 1, -2], value=4.0),
            op_case(op, In((2, 3, 5)), pad=[0, 0, 0, 0, 0, 0]),
            op_case(op, In((2, 5)), pad=[-3, -2]),  # cropped to nothing
            op_case(op, In((2, 0)), pad=[1, 1], value=2.0),  # all value
            op_case(op, In((3, 4)), pad=[2, 2], value="inf"),
            op_case(op, In((3, 4)), pad=[0, 1, 1, 0], value="-inf"),
            op_case(op, In((3, 4)), pad=[1, 1], value="nan"),
            op_case(op, In((3, 4), kind="special"), pad=[1, 1]),
            op_case(op, In((3, 4), D), pad=[1, 1], value=1e300),
            op_case(op, In((1, 1, 1)), pad=[3, 3, 3, 3, 3, 3], value=1.0),
            op_case(op, In((129, 257)), pad=[3, 4, 1, 1], value=-0.5),
            op_case(op, In((129, 257)), pad=[-3, -4, -1, -1]),
            viewed("aten.t.default", {}, op, In((5, 3)), pad=[1, 2, 2, 0], value=1.0)]
    return out


def _padded(shape, pad):
    """The output shape of a mirror pad: pad holds (before, after) pairs,
    last dim first."""
    s = list(shape)
    for i in range(len(pad) // 2):
        s[-1 - i] += pad[2 * i] + pad[2 * i + 1]
    return tuple(s)


# (shape, padding) per op kind, and a shape over the parallel threshold.
REFLECT1 = [((3, 7), [2, 3]), ((2, 3, 7), [3, 1]), ((2, 7), [0, 0]), ((3, 7), [-1, 2]),
            ((2, 3, 7), [6, 6]), ((2, 1), [0, 0]), ((0, 2, 5), [1, 2]), ((2, 3, 5), [-2, 4]),
            ((4, 64, 257), [5, 7])]
REPLICATE1 = [((3, 7), [2, 3]), ((2, 3, 7), [3, 1]), ((3, 4), [6, 2]), ((2, 3, 1), [2, 3]),
              ((3, 7), [-1, 2]), ((2, 5), [-4, 0]), ((0, 2, 5), [1, 2]), ((4, 64, 257), [5, 7])]
REFLECT2 = [((3, 5, 6), [1, 2, 3, 0]), ((2, 3, 5, 6), [2, 2, 2, 2]), ((2, 3, 5, 6), [5, 5, 4, 4]),
            ((1, 2, 5, 6), [-1, 2, 1, -2]), ((2, 1, 1, 4), [1, 3, 0, 0]), ((0, 2, 3, 3), [1, 1, 1, 1]),
            ((2, 8, 64, 65), [3, 3, 3, 3])]
REPLICATE2 = [((3, 5, 6), [1, 2, 3, 0]), ((2, 3, 5, 6), [2, 2, 2, 2]), ((2, 2, 3, 2), [5, 1, 0, 7]),
              ((1, 2, 5, 6), [-1, 2, 1, -2]), ((2, 1, 1, 1), [2, 2, 2, 2]), ((0, 2, 3, 3), [1, 1, 1, 1]),
              ((2, 8, 64, 65), [3, 3, 3, 3])]


def _mirror():
    out = []
    for name, table in (("reflection_pad1d", REFLECT1), ("replication_pad1d", REPLICATE1),
                        ("reflection_pad2d", REFLECT2), ("replication_pad2d", REPLICATE2)):
        op, back = f"aten.{name}.default", f"aten.{name}_backward.default"
        for k, (shape, pad) in enumerate(table):
            dts = (F, D) if k < 2 else (F,)
            for dt in dts:
                out.append(op_case(op, In(shape, dt), padding=pad))
                out.append(op_case(back, In(_padded(shape, pad), dt), In(shape, dt), padding=pad))
        shape, pad = table[0][0], table[0][1]
        out.append(op_case(op, In(shape, kind="special"), padding=pad))
        # a strided input: torch pads the view, we pad its dense copy
        perm = list(range(len(shape)))
        perm[0], perm[1] = perm[1], perm[0]
        view_shape = tuple(shape[p] for p in perm)
        out.append(viewed("aten.permute.default", {"dims": perm}, op, In(view_shape), padding=pad))
    return out


def _negatives():
    op = "aten.constant_pad_nd.default"
    out = [
        neg_case(op, In((2, 3, 5)), pad=[1, 2, 3], error="pad [1, 2, 3] must have an even number of values"),
        neg_case(op, In((2, 3, 5)), pad=[1] * 8, error="pad [1, 1, 1, 1, 1, 1, 1, 1] pads 4 dims of float32[2, 3, 5]"),
        neg_case(op, In((2, 3, 5)), pad=[-3, -3], error="pads (-3, -3) make dim 2 of float32[2, 3, 5] negative"),
        neg_case(op, In((2, 3), I), pad=[1, 1], value="nan",
                 error="value nan cannot be converted to int64 without overflow"),
        neg_case(op, In((2, 3), I), pad=[1, 1], value=1e30,
                 error="value 1e+30 cannot be converted to int64 without overflow"),
        neg_case(op, In((2, 3), I32), pad=[1, 1], value=2 ** 31,
                 error="value 2147483648 cannot be converted to int32 without overflow"),
        neg_case(op, In((2, 3), U8), pad=[1, 1], value=300,
                 error="value 300 cannot be converted to uint8 without overflow"),
        neg_case(op, In((2, 3)), pad=[1, 1], value=1e300,
                 error="value 1e+300 cannot be converted to float32 without overflow"),
    ]
    for name in ("reflection_pad1d", "replication_pad1d"):
        op = f"aten.{name}.default"
        out += [
            neg_case(op, In((2, 4), I), padding=[1, 1], error="takes float32, float64 or bfloat16, got int64[2, 4]",
                     unsupported="integer padding (torch 2.x takes it, 1.13 does not)"),
            neg_case(op, In((4,)), padding=[1, 1], error="expects a 2-d or 3-d (batched) input, got float32[4]"),
            neg_case(op, In((2, 0, 4)), padding=[1, 1],
                     error="expects non-empty dims besides the batch dim, got float32[2, 0, 4]"),
            neg_case(op, In((2, 4)), padding=[-3, -2],
                     error="input (W: 4) is too small for padding (-3, -2): output W would be -1"),
            neg_case(op, In((2, 4)), padding=[1], error="padding [1] must have 2 values",
                     unsupported="torch 1.13 reads past a short padding list"),
            neg_case(f"aten.{name}_backward.default", In((2, 7)), In((2, 4)), padding=[1, 1],
                     error="grad_output is float32[2, 7], the padded output is float32[2, 6]"),
            neg_case(f"aten.{name}_backward.default", In((2, 6), D), In((2, 4)), padding=[1, 1],
                     error="grad_output is float64[2, 6], the padded output is float32[2, 6]"),
        ]
    op = "aten.reflection_pad1d.default"
    out += [neg_case(op, In((2, 4)), padding=[4, 0],
                     error="padding (4, 0) must be less than the size 4 of dim 1 of float32[2, 4]"),
            neg_case(op, In((2, 4)), padding=[-2, -2],
                     error="input (W: 4) is too small for padding (-2, -2): output W would be 0"),
            neg_case("aten.reflection_pad1d_backward.default", In((2, 8)), In((2, 4)), padding=[4, 0],
                     error="padding (4, 0) must be less than the size 4 of dim 1 of float32[2, 4]")]
    for name in ("reflection_pad2d", "replication_pad2d"):
        op = f"aten.{name}.default"
        out += [
            neg_case(op, In((3, 4)), padding=[1, 1, 1, 1], error="expects a 3-d or 4-d (batched) input, got float32[3, 4]"),
            neg_case(op, In((1, 2, 0, 4)), padding=[1, 1, 1, 1],
                     error="expects non-empty dims besides the batch dim, got float32[1, 2, 0, 4]"),
            neg_case(op, In((2, 3, 4)), padding=[1, 1, -2, -2],
                     error="input (H: 3) is too small for padding (-2, -2): output H would be -1"),
            neg_case(op, In((2, 3, 4), D), padding=[1, 1, 1], error="padding [1, 1, 1] must have 4 values",
                     unsupported="torch 1.13 reads past a short padding list"),
            neg_case(f"aten.{name}_backward.default", In((1, 3, 5, 6)), In((1, 3, 4, 4)), padding=[1, 1, 0, 2],
                     error="grad_output is float32[1, 3, 5, 6], the padded output is float32[1, 3, 6, 6]"),
        ]
    out += [neg_case("aten.reflection_pad2d.default", In((2, 3, 4)), padding=[1, 1, 3, 0],
                     error="padding (3, 0) must be less than the size 3 of dim 1 of float32[2, 3, 4]")]
    return out


def cases():
    return _constant() + _mirror() + _negatives()
