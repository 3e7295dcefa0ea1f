"""bfloat16 twins of other families' float32 cases, for the ops that take
bfloat16 but had no bfloat16 case (test_every_bfloat16_op_has_bfloat16_oracle_cases):
pooling, padding, upsampling, index and scatter ops, cumsum, flip, the
view and shape ops, creation ops, and the fused ops the passes make.

Each twin is the float32 case with every float32 input drawn as bfloat16
(and a float32 dtype attr made bfloat16): the same shapes and attrs, which
the float32 suite already checks. Ops that move bytes compare bitwise;
ops that compute (ViaFloat32: torch's bfloat16 kernels also compute in
float32 and round once, but sum in other orders) within an ulp, or an ulp
of the output's scale. The case names carry their own tag, so the other
families' cases keep theirs (and their seeds)."""
import copy
import importlib
import os
import pkgutil

import torch

from .harness import Case, In, Node, Program, op_case

CASE_TAG = "bf16m."
BF = "bfloat16"

# Ops that only move or select bytes: bitwise.
MOVES = {
    "aten._unsafe_view.default", "aten.as_strided.default", "aten.flip.default", "aten.gather.default",
    "aten.repeat.default", "aten.reshape.default", "aten.select.int", "aten.slice_scatter.default",
    "aten.split_with_sizes.default", "aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims",
    "aten.stack.default", "aten.transpose.int", "aten.unbind.int", "aten.unsafe_split.Tensor",
    "aten.unsqueeze.default", "aten.scatter.src", "aten.new_ones.default", "aten.new_zeros.default",
    "aten.ones_like.default", "aten.zeros_like.default", "aten.zeros.default", "aten.arange.default",
    "aten.arange.start_step", "trainstep.constant", "aten.reflection_pad1d.default",
    "aten.reflection_pad2d.default", "aten.replication_pad1d.default", "aten.replication_pad2d.default",
    "aten.upsample_nearest2d.default", "aten.upsample_nearest2d.vec", "aten.adaptive_max_pool2d.default",
    "trainstep.max_pool2d_code",
}
# Ops that compute: within an ulp, or an ulp of the output's scale (sums).
COMPUTES = {
    "aten._adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d_backward.default",
    "aten.adaptive_max_pool2d_backward.default", "aten.avg_pool2d.default",
    "aten.avg_pool2d_backward.default", "aten.cumsum.default", "aten.index_put.default",
    "aten.native_layer_norm_backward.default", "aten.reflection_pad1d_backward.default",
    "aten.reflection_pad2d_backward.default", "aten.replication_pad1d_backward.default",
    "aten.replication_pad2d_backward.default", "aten.scatter_add.default",
    "aten.upsample_bilinear2d.default", "aten.upsample_bilinear2d.vec",
    "aten.upsample_bilinear2d_backward.default", "aten.upsample_bilinear2d_backward.vec",
    "aten.upsample_nearest2d_backward.default", "aten.upsample_nearest2d_backward.vec",
    "trainstep.batch_norm_relu", "trainstep.conv2d_relu", "trainstep.conv_backward_relu",
    "trainstep.fused_elementwise", "trainstep.matmul", "trainstep.max_pool2d_code_backward",
}
PER_OP = 2  # twins per op: the first float32 cases of each
# torch 1.13 has no bfloat16 CPU kernels for these: their twins need torch 2.
NOT_IN_TORCH_1 = {"aten.reflection_pad1d.default", "aten.reflection_pad1d_backward.default",
                  "aten.reflection_pad2d.default", "aten.reflection_pad2d_backward.default",
                  "aten.replication_pad1d.default", "aten.replication_pad1d_backward.default",
                  "aten.replication_pad2d.default", "aten.replication_pad2d_backward.default"}
# Ops whose per-channel inputs stay float32 under autocast: only the
# activation (the first node's input 0) is drawn as bfloat16.
ACTIVATION_ONLY = {"trainstep.batch_norm_relu"}


def _as_bf16(v):
    if isinstance(v, In) and v.dtype == "float32":
        v = copy.copy(v)
        v.dtype = BF
    elif isinstance(v, list):
        v = [_as_bf16(x) for x in v]
    return v


def _covers(case):
    ops = {case.op}
    for names in case.expect_ops.values():
        ops.update(names)
    return ops & (MOVES | COMPUTES)


def _twin(case, op):
    c = copy.deepcopy(case)
    c.op = op
    first = c.program.nodes[0].inputs[0] if c.program.nodes and c.program.nodes[0].inputs else None
    c.program.inputs = {k: _as_bf16(v) if op not in ACTIVATION_ONLY or k == first else v
                        for k, v in c.program.inputs.items()}
    for n in c.program.nodes:
        if n.attrs.get("dtype") == "float32":
            n.attrs["dtype"] = BF
    c.tol, c.ref = None, None
    if op in COMPUTES:
        c.ulp, c.ulp_scale = 1, 2
    return c


def cases():
    here = os.path.dirname(__file__)
    pkg = os.path.basename(here)
    out, count = [], {}
    for m in sorted(pkgutil.iter_modules([here]), key=lambda m: m.name):
        if not m.name.startswith("cases_") or m.name in ("cases_bf16", "cases_bf16_more"):
            continue
        for c in importlib.import_module(f"{pkg}.{m.name}").cases():
            if not isinstance(c, Case) or c.ref is not None:
                continue
            for op in sorted(_covers(c)):
                if count.get(op, 0) < PER_OP and _floats(c):
                    count[op] = count.get(op, 0) + 1
                    t = _twin(c, op)
                    t.min_torch = 2 if op in NOT_IN_TORCH_1 else 1
                    out.append(t)
    # Creation ops whose float32 cases take the default dtype: explicit ones.
    out += [op_case("aten.zeros.default", size=[2, 3], dtype=BF),
            op_case("aten.zeros.default", size=[129, 257], dtype=BF)]
    for v in (2.5, 1.0 + 2.0 ** -8 + 2.0 ** -20, "-inf"):  # exact, a tie rounded up, infinite
        want = torch.tensor(float(v), dtype=torch.bfloat16)
        out.append(Case("trainstep.constant", Program({}, [Node(
            "trainstep.constant", [], {"value": v, "dtype": BF, "wrapped": False})]),
            ref=lambda w=want: w))
    return out


def _floats(case):
    """The case draws a float32 input or sets a float32 dtype: it has a twin."""
    def f(v):
        return any(f(x) for x in v) if isinstance(v, list) else isinstance(v, In) and v.dtype == "float32"
    return (any(f(v) for v in case.program.inputs.values()) or
            any(n.attrs.get("dtype") == "float32" for n in case.program.nodes))
