"""Oracle cases: nearest and bilinear 2-D upsampling and their backward, in
both overloads (`.vec`: output_size or scale_factors, torch 1.13; `.default`:
output_size plus scales_h/scales_w, torch 2.x) (src/ops/upsample.cpp).

Non-integer scale factors on odd sizes check the source-index rule: with a
scale given, torch maps dst -> floor(dst / scale) (and bilinear's
(dst + 0.5) / scale - 0.5), not in/out; so do the .default cases whose
scales disagree with output_size."""
import torch

from . import harness
from .harness import In, neg_case, op_case, viewed

F, D, I = "float32", "float64", "int64"
A = torch.ops.aten
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
# torch 1.13 computes bilinear's float32 source positions and weights in
# double, 2.x (and we) in float32: a 1-ulp position error moves a weight by
# up to ~1e-5 on 80-pixel rows. Exact (default tolerance) under 2.x.
BILINEAR_F32_TOL = None if TORCH2 else (1e-5, 3e-5)


def _backward_vec_ref(forward):
    """torch 2.x has no upsample_*_backward.vec: the gradient of the .vec
    forward through autograd gives the same result."""
    def ref(args, attrs):
        (g,) = args
        x = torch.zeros(attrs["input_size"], dtype=g.dtype, requires_grad=True)
        extra = [attrs["align_corners"]] if "align_corners" in attrs else []
        sizes = [attrs["output_size"]] + extra + [attrs["scale_factors"]]
        forward(x, *sizes).backward(g)
        return x.grad
    return ref


harness.NEWER_ATEN_REFS.setdefault("aten.upsample_nearest2d_backward.vec",
                                   _backward_vec_ref(A.upsample_nearest2d.vec))
harness.NEWER_ATEN_REFS.setdefault("aten.upsample_bilinear2d_backward.vec",
                                   _backward_vec_ref(A.upsample_bilinear2d.vec))

# (input shape, output_size or None, scale_factors or None)
SIZES = [((2, 3, 5, 7), [10, 14], None),         # 2x: the shift path
         ((1, 2, 5, 7), [7, 9], None),            # in/out ratio, odd sizes
         ((2, 2, 9, 8), [4, 3], None),            # downsampling
         ((1, 3, 6, 6), [6, 6], None),            # same size: a copy
         ((1, 1, 1, 1), [3, 5], None),            # one pixel
         ((2, 3, 5, 7), None, [2.0, 2.0]),
         ((1, 2, 5, 7), None, [1.7, 2.3]),        # non-integer scales: 1/scale, not in/out
         ((2, 1, 7, 5), None, [1.1, 0.6]),        # 1.1 on 7 -> 7 (copy), 0.6 downsamples
         ((1, 1, 5, 4), None, [2.1, 1.0]),        # 2.1 on 5 -> 10 = 2 * 5: dst / 2
         ((1, 2, 5, 3), None, [3.0, 1.5]),
         ((1, 1, 9, 11), None, [0.55, 1.35]),
         ((1, 2, 6, 4), None, [2.5, 1.25]),
         ((2, 8, 40, 40), [80, 80], None),        # over the parallel threshold
         ((0, 2, 3, 3), [6, 6], None)]            # empty batch
# Where out == in or out == 2 * in although the scale is not 1 or 2, torch
# 2.x copies / halves (as we do); torch 1.13's nearest forward does so only
# when C == 1 (its channels-last kernel) and applies 1/scale otherwise, so
# under 1.13 these cases' reference runs each channel as its own C == 1
# image (the same cases under both torches: docs/ops.md counts them).
COPY_OR_HALVE = [((2, 2, 7, 5), None, [1.1, 0.6]), ((2, 3, 5, 4), None, [2.1, 1.0])]
SIZES += COPY_OR_HALVE


def _per_channel(fwd, attrs):
    """fwd on each channel as a C == 1 image (torch 1.13's consistent path)."""
    def ref(x):
        n, c, h, w = x.shape
        y = fwd(x.reshape(n * c, 1, h, w), *attrs)
        return y.reshape(n, c, *y.shape[2:])
    return ref

# .default with scales that disagree with output_size: the index rule uses
# the scales. (input shape, output_size, scales_h, scales_w)
DEFAULT_SCALES = [((1, 2, 5, 7), [8, 16], 1.7, 2.3),
                  ((1, 2, 5, 7), [9, 12], 1.9, 1.75),
                  ((2, 1, 6, 5), [6, 10], 1.3, 2.0),   # 6 -> 6 copies whatever the scale
                  ((1, 2, 4, 4), [7, 5], -1.0, None)]  # a non-positive scale: in/out


def _out_size(shape, size, scales):
    return size or [int(shape[2] * scales[0]), int(shape[3] * scales[1])]


def _cases(name, extra):
    """Forward and backward of aten.<name>, both overloads; extra: the
    align_corners attribute (bilinear) or {}."""
    fwd_v, fwd_d = f"aten.{name}.vec", f"aten.{name}.default"
    bwd_v, bwd_d = f"aten.{name}_backward.vec", f"aten.{name}_backward.default"
    out = []
    for dt in (F, D):
        tol = BILINEAR_F32_TOL if "bilinear" in name and dt == F else None
        extra = dict(extra, tol=tol)
        for shape, size, scales in SIZES:
            if dt == D and shape[2] * shape[3] > 1000:
                continue
            osz = _out_size(shape, size, scales)
            sh, sw = scales or (None, None)
            grad = In((shape[0], shape[1], *osz), dt)
            ref_v = ref_d = None
            if not TORCH2 and name == "upsample_nearest2d" and (shape, size, scales) in COPY_OR_HALVE:
                ref_v = _per_channel(A.upsample_nearest2d.vec, (size, scales))
                ref_d = _per_channel(A.upsample_nearest2d.default, (osz, sh, sw))
            out.append(op_case(fwd_v, In(shape, dt), output_size=size, scale_factors=scales, ref=ref_v,
                               **extra))
            out.append(op_case(fwd_d, In(shape, dt), output_size=osz, scales_h=sh, scales_w=sw, ref=ref_d,
                               **extra))
            out.append(op_case(bwd_v, grad, output_size=size, input_size=list(shape), scale_factors=scales,
                               **extra))
            out.append(op_case(bwd_d, grad, output_size=osz, input_size=list(shape), scales_h=sh, scales_w=sw,
                               **extra))
        for shape, osz, sh, sw in DEFAULT_SCALES:
            grad = In((shape[0], shape[1], *osz), dt)
            out.append(op_case(fwd_d, In(shape, dt), output_size=osz, scales_h=sh, scales_w=sw, **extra))
            out.append(op_case(bwd_d, grad, output_size=osz, input_size=list(shape), scales_h=sh, scales_w=sw,
                               **extra))
    # NaN and inf travel through (with align_corners, sizes whose positions
    # are exact in float and double); a strided input.
    size, scales = ([9, 13], None) if extra.get("align_corners") else (None, [1.7, 2.3])
    out.append(op_case(fwd_v, In((1, 2, 5, 7), kind="special"), output_size=size, scale_factors=scales,
                       **extra))
    out.append(viewed("aten.permute.default", {"dims": [0, 3, 1, 2]}, fwd_d, In((2, 5, 7, 3)),
                      output_size=[9, 11], **extra))
    return out


def _negatives():
    out = []
    for name, extra in (("upsample_nearest2d", {}), ("upsample_bilinear2d", {"align_corners": False})):
        fwd_v, fwd_d = f"aten.{name}.vec", f"aten.{name}.default"
        bwd_v, bwd_d = f"aten.{name}_backward.vec", f"aten.{name}_backward.default"
        out += [
            neg_case(fwd_v, In((2, 5, 7)), output_size=[10, 14], scale_factors=None, **extra,
                     error="input must be rank 4 (N, C, H, W), got [2, 5, 7]"),
            neg_case(fwd_d, In((2, 5, 7)), output_size=[10, 14], **extra,
                     error="input must be rank 4 (N, C, H, W), got [2, 5, 7]"),
            neg_case(fwd_v, In((1, 2, 5, 7)), output_size=[10, 14], scale_factors=[2.0, 2.0], **extra,
                     error="give exactly one of output_size and scale_factors"),
            neg_case(fwd_v, In((1, 2, 5, 7)), output_size=None, scale_factors=None, **extra,
                     error="give exactly one of output_size and scale_factors"),
            neg_case(fwd_v, In((1, 2, 5, 7)), output_size=None, scale_factors=[2.0], **extra,
                     error="scale_factors must have 2 values, got 1"),
            neg_case(fwd_v, In((1, 2, 5, 7)), output_size=None, scale_factors=[0.1, 2.0], **extra,
                     error="scale_factors 0.1, 2 give no valid output size for input 5x7"),
            neg_case(fwd_v, In((1, 2, 5, 7)), output_size=[0, 3], scale_factors=None, **extra,
                     error="input and output sizes must be positive, got input 5x7 and output 0x3"),
            neg_case(fwd_d, In((1, 2, 5, 7)), output_size=[10], **extra,
                     error="output_size must have 2 values, got 1"),
            neg_case(fwd_d, In((1, 2, 0, 7)), output_size=[4, 4], **extra,
                     error="input and output sizes must be positive, got input 0x7 and output 4x4"),
            neg_case(fwd_d, In((1, 2, 5, 7), I), output_size=[10, 14], **extra,
                     error="input must be float32, float64 or bfloat16, got int64[1, 2, 5, 7]"),
            neg_case(bwd_d, In((1, 2, 10, 13)), output_size=[10, 14], input_size=[1, 2, 5, 7], **extra,
                     error="grad_output must be float32[1, 2, 10, 14], got float32[1, 2, 10, 13]"),
            neg_case(bwd_d, In((2, 10, 14)), output_size=[10, 14], input_size=[2, 5, 7], **extra,
                     error="input_size must have 4 values, got 3"),
            neg_case(bwd_v, In((1, 2, 10, 13)), output_size=None, input_size=[1, 2, 5, 7],
                     scale_factors=[2.0, 2.0], **extra,
                     error="grad_output must be float32[1, 2, 10, 14], got float32[1, 2, 10, 13]"),
        ]
    return out


def cases():
    out = _cases("upsample_nearest2d", {})
    for align in (False, True):
        out += _cases("upsample_bilinear2d", {"align_corners": align})
    return out + _negatives()
