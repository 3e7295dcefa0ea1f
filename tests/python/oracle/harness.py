"""The per-op oracle harness: tiny programs built from declarative case
tables (cases_*.py beside this file), run by `trainstep run-program`, and
compared with PyTorch eager on the same inputs. See README.md here.

A program is a list of nodes over named inputs. Node attributes follow the
exporter's rule (python/trainstep/serialize.py): an op's Tensor arguments
are its inputs, in schema order; every other argument is an attribute under
its schema name, defaults filled in from the ATen schema. The declared
output types come from running the nodes in torch, as the exporter does, so
a dtype or shape inference that disagrees with PyTorch fails verify.
"""
import importlib
import math
import os
import pkgutil
import subprocess
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
import torch

import trainstep.rng  # noqa: F401  (registers torch.ops.trainstep.philox_*)
from trainstep import safetensors_io
from trainstep.serialize import attr_value

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("plain", "opt")

# Default (rtol, atol) by output dtype; ints and bools compare exactly.
# bfloat16 outputs compare bitwise unless the case allows ulps (close_bf16).
DEFAULT_TOL = {torch.float32: (1e-6, 1e-6), torch.float64: (1e-12, 1e-12)}


# ---------------------------------------------------------------- inputs

@dataclass
class In:
    """A random input: shape, dtype name and how to draw it.

    kind: normal | uniform (lo, hi) | positive | int (lo, hi) | bool |
    special (floats mixed with nan, +-inf, +-0) | values (explicit list).
    """
    shape: tuple
    dtype: str = "float32"
    kind: str = ""
    lo: float = -5
    hi: float = 6
    values: Any = None

    def make(self, rng):
        dt = getattr(torch, self.dtype)
        kind = self.kind or ("bool" if self.dtype == "bool" else
                             "normal" if dt.is_floating_point else "int")
        shape = tuple(self.shape)
        # bfloat16 inputs are drawn in float32 and rounded by torch, so each
        # value is bfloat16-exact and both sides read the same bits.
        via = torch.float32 if dt == torch.bfloat16 else dt
        if kind == "values":
            return torch.tensor(self.values, dtype=via).to(dt).reshape(shape)
        if kind == "normal":
            a = rng.standard_normal(shape)
        elif kind == "uniform":
            a = rng.uniform(self.lo, self.hi, shape)
        elif kind == "positive":
            a = rng.uniform(0.1, 3.0, shape)
        elif kind == "int":
            a = rng.integers(int(self.lo), int(self.hi), shape)
        elif kind == "bool":
            a = rng.integers(0, 2, shape).astype(bool)
        elif kind == "special":
            a = rng.standard_normal(shape)
            pool = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0])
            mask = rng.uniform(size=shape) < 0.4
            a = np.where(mask, rng.choice(pool, shape), a)
        else:
            raise ValueError(f"unknown input kind {kind!r}")
        return torch.from_numpy(np.asarray(a)).to(via).to(dt).reshape(shape)


@dataclass
class Scalar:
    """A Python number passed where the schema wants a Tensor: becomes a
    trainstep.constant node (0-d, wrapped), as the exporter writes it."""
    value: Any


@dataclass
class Node:
    op: str
    inputs: list          # input names, node refs "n<k>" / "n<k>.<j>", None, or Scalar
    attrs: dict = field(default_factory=dict)


@dataclass
class Program:
    """inputs: name -> In (or a torch.Tensor); nodes in order; outputs: refs
    (default: every tensor output of the last node)."""
    inputs: dict
    nodes: list
    outputs: Optional[list] = None


@dataclass
class Case:
    op: str                      # the op under test (counted for coverage)
    program: Program
    tol: Optional[tuple] = None  # (rtol, atol) for float32/float64 outputs
    ref: Optional[Callable] = None  # torch reference: f(*inputs) -> tensor(s); default: run nodes
    # bfloat16 outputs: bitwise unless one of these (or tol) is given; then
    # an element passes within `ulp` bfloat16 steps of torch's, or within
    # `ulp_scale` ulps of the output's largest finite magnitude, or within
    # tol (README.md, "bfloat16").
    ulp: int = 0
    ulp_scale: float = 0
    expect_ops: dict = field(default_factory=dict)  # mode -> ops that must appear after passes
    name: str = ""
    source: str = ""             # the cases_*.py file
    # The torch major version whose kernels the case needs (1.13 lacks some
    # bfloat16 ones): older torches skip it, and it still counts for the op.
    min_torch: int = 1


TORCH_MAJOR = int(torch.__version__.split(".")[0])


def runs_here(case):
    """Whether this torch has what the case needs (Case.min_torch)."""
    return getattr(case, "min_torch", 1) <= TORCH_MAJOR


@dataclass
class Neg:
    """A bad program that must fail with exactly `error` (the op's message,
    after "node 'n0' (OP): "). torch must reject it too unless `unsupported`
    says why we refuse what torch accepts. `types` declares the outputs
    when the failure comes after verify (compile or run)."""
    op: str
    program: Program
    error: str
    unsupported: str = ""
    types: Optional[list] = None
    name: str = ""
    source: str = ""


# ---------------------------------------------------------------- sugar

def op_case(op, *inputs, tol=None, ref=None, expect_ops=None, ulp=0, ulp_scale=0, **attrs):
    """One node applying `op` to inputs (In, tensors, Scalar or None)."""
    return Case(op, _one_node(op, inputs, attrs), tol=tol, ref=ref, expect_ops=expect_ops or {},
                ulp=ulp, ulp_scale=ulp_scale)


def neg_case(op, *inputs, error, unsupported="", types=None, **attrs):
    return Neg(op, _one_node(op, inputs, attrs), error, unsupported, types)


def viewed(view_op, view_attrs, op, *inputs, which=0, tol=None, ulp=0, ulp_scale=0, **attrs):
    """op applied to a view of input `which`: torch runs the op on the
    strided view, our program on the view op's dense copy."""
    prog = _one_node(op, inputs, attrs)
    name = f"x{which}"
    view = Node(view_op, [name], dict(view_attrs))
    first = prog.nodes[0]
    first.inputs = ["n0" if r == name else r for r in first.inputs]
    prog.nodes = [view, Node(first.op, first.inputs, first.attrs)]
    return Case(op, prog, tol=tol, ulp=ulp, ulp_scale=ulp_scale)


def fused(op, *inputs, bool_out=False, tol=None, ulp=0, ulp_scale=0, **attrs):
    """op followed by one more pointwise node (neg; a cast to float32 for a
    bool result), so the fusion pass groups the two and the opt mode runs
    op's float32 tile form (OpDef::make_tile) instead of its kernel."""
    prog = _one_node(op, inputs, attrs)
    # (neg after neg would be simplified away: abs follows it)
    follow = (Node("aten._to_copy.default", ["n0"], {"dtype": "float32"}) if bool_out else
              Node("aten.abs.default" if op == "aten.neg.default" else "aten.neg.default", ["n0"]))
    prog.nodes.append(follow)
    prog.outputs = ["n0", "n1"]
    return Case(op, prog, tol=tol, expect_ops={"opt": ["trainstep.fused_elementwise"]},
                ulp=ulp, ulp_scale=ulp_scale)


def _one_node(op, inputs, attrs):
    ins, refs = {}, []
    for i, x in enumerate(inputs):
        if x is None or isinstance(x, Scalar):
            refs.append(x)
        elif isinstance(x, (list, tuple)):  # a Tensor[] argument (cat, index_put)
            for j, y in enumerate(x):
                ins[f"x{i}_{j}"] = y
                refs.append(f"x{i}_{j}")
        else:
            ins[f"x{i}"] = x
            refs.append(f"x{i}")
    return Program(ins, [Node(op, refs, dict(attrs))])


# ---------------------------------------------------------------- torch side

def overload(op):
    """torch.ops.<ns>.<name>.<overload> for "ns.name.overload", or None."""
    parts = op.split(".")
    if len(parts) != 3:
        return None
    try:
        return getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
    except (AttributeError, RuntimeError):
        return None


def _is_tensor_arg(a):
    return "Tensor" in str(a.type)


def full_attrs(op, attrs):
    """attrs plus schema defaults for every non-tensor argument not given,
    serialised as the exporter does."""
    ov = overload(op)
    if ov is None:
        return dict(attrs)
    out = {}
    for a in ov._schema.arguments:
        if _is_tensor_arg(a):
            continue
        if a.name in attrs:
            out[a.name] = attrs[a.name]
        elif a.has_default_value():
            out[a.name] = attr_value(a.default_value)
        else:
            raise KeyError(f"{op}: attribute '{a.name}' has no default; the case must give it")
    extra = set(attrs) - set(out)
    if extra:
        raise KeyError(f"{op}: unknown attributes {sorted(extra)}")
    return out


def _is_tensor_list(a):
    return str(a.type).startswith("List[") and "Tensor" in str(a.type)


def _torch_attr(v, a):
    """An attribute as torch takes it: dtype names become dtypes (ScalarType
    prints as int in the schema), non-finite float strings become floats."""
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return float(v)
    if isinstance(v, str) and "str" not in str(a.type) and \
            isinstance(getattr(torch, v, None), torch.dtype):
        return getattr(torch, v)
    return v


def call_aten(op, args, attrs):
    """Calls torch's op: tensor arguments from args (a list for Tensor[]),
    the rest from attrs by schema name."""
    ov = overload(op)
    if ov is None:
        raise KeyError(f"no torch op for {op}; give the case a ref")
    schema = ov._schema.arguments
    n_single = sum(1 for a in schema if _is_tensor_arg(a) and not _is_tensor_list(a))
    pos, kw, it = [], {}, 0
    for a in schema:
        if _is_tensor_arg(a):
            if _is_tensor_list(a):
                k = len(args) - n_single
                v, it = list(args[it:it + k]), it + k
            else:
                v, it = args[it], it + 1
        else:
            v = _torch_attr(attrs[a.name], a)
        if a.kwarg_only:
            kw[a.name] = v
        else:
            pos.append(v)
    # A Python number in a Tensor slot (an exporter's wrapped scalar): the
    # overload refuses it, the op packet picks the Scalar overload, which
    # promotes exactly as a wrapped number does.
    if any(not isinstance(x, torch.Tensor) and x is not None
           for a, x in zip(schema, pos) if _is_tensor_arg(a) and not _is_tensor_list(a)):
        return ov.overloadpacket(*pos, **kw)
    return ov(*pos, **kw)


# Torch references of the trainstep.* ops that passes create (no torch op).
def _ref_constant(args, attrs):
    v = attrs["value"]
    v = float(v) if isinstance(v, str) else v
    if attrs.get("wrapped"):
        return v  # a Python number: PyTorch's wrapped-scalar promotion
    dt = attrs.get("dtype") or ("bool" if isinstance(v, bool) else
                                "int64" if isinstance(v, int) else "float32")
    return torch.tensor(v, dtype=getattr(torch, dt))


def _ref_matmul(args, attrs):
    a, b = args
    return torch.mm(a.t() if attrs["trans_a"] else a, b.t() if attrs["trans_b"] else b)


def _ref_addmm_t(args, attrs):
    s, a, b = args
    return torch.addmm(s, a.t() if attrs["trans_a"] else a, b.t() if attrs["trans_b"] else b,
                       beta=attrs["beta"], alpha=attrs["alpha"])


def _ref_conv_relu(args, attrs):
    return torch.relu(call_aten("aten.convolution.default", args, attrs))


def _ref_batch_norm_relu(args, attrs):
    y, mean, invstd = call_aten("aten.native_batch_norm.default", args, attrs)
    return torch.relu(y), mean, invstd


def _ref_fused(args, attrs):
    vals = []
    for m in attrs["members"]:
        ins = [args[i] if kind == "in" else vals[i] for kind, i in m["args"]]
        vals.append(eval_node(m["op"], ins, m["attrs"]))
    return tuple(vals[j] for j in attrs["outputs"])


def _bn_attrs(attrs):
    return {k: v for k, v in attrs.items() if k not in ("members", "outputs")}


def _ref_bn_epilogue(args, attrs):
    """batch norm, its coefficients (alpha = invstd * w, beta = b - mean *
    alpha) and the group on y (group input 0) and args[5:]."""
    x, w, b, rm, rv = args[:5]
    y, mean, invstd = call_aten("aten.native_batch_norm.default", args[:5], attrs)
    if attrs["training"]:
        m, inv = mean.double(), invstd.double()
    else:
        m, inv = rm.double(), 1 / torch.sqrt(rv.double() + attrs["eps"])
    alpha = inv * (w.double() if w is not None else 1)
    beta = (b.double() if b is not None else 0) - m * alpha.float().double()
    coeffs = torch.stack([alpha.float(), beta.float()])
    return (coeffs, mean, invstd) + _ref_fused([y] + list(args[5:]), attrs)


def _ref_bn_prologue(args, attrs):
    """batch norm's backward of the group's gradient, whose input 0 is
    y = x * alpha + beta (coeffs = args[0]) and the rest args[7:]."""
    coeffs, x = args[0], args[1]
    view = [1, -1] + [1] * (x.dim() - 2)
    y = x * coeffs[0].view(view) + coeffs[1].view(view)
    (g,) = _ref_fused([y] + list(args[7:]), attrs)
    return call_aten("aten.native_batch_norm_backward.default", [g, x] + list(args[2:7]),
                     _bn_attrs(attrs))


def _ref_pool_code(args, attrs):
    """Values, and per window: the argmax's offset in the (unclipped) window,
    row-major, | 0x80 unless the max is <= 0."""
    (x,) = args
    kh, kw = attrs["kernel_size"]
    sh, sw = attrs.get("stride") or [kh, kw]
    ph, pw = attrs.get("padding", [0, 0])
    dh, dw = attrs.get("dilation", [1, 1])
    y, idx = torch.ops.aten.max_pool2d_with_indices.default(
        x, [kh, kw], [sh, sw], [ph, pw], [dh, dw], attrs.get("ceil_mode", False))
    W = x.shape[-1]
    oh = torch.arange(y.shape[-2]).view(-1, 1)
    ow = torch.arange(y.shape[-1]).view(1, -1)
    off = (idx // W - (oh * sh - ph)) // dh * kw + (idx % W - (ow * sw - pw)) // dw
    return y, (off + 128 * (~(y <= 0)).to(torch.int64)).to(torch.uint8)


def _ref_all_reduce_start(args, attrs):
    # One process: the bucket is the gradients flattened end to end, and
    # there is no request (-1). Attr after: the last input orders it only.
    args = args[:-1] if attrs.get("after") else args
    return torch.cat([a.flatten() for a in args]), torch.tensor(-1, dtype=torch.int64)


def _ref_all_reduce_wait(args, attrs):
    bucket, out, at = args[0], [], 0
    for shape in attrs["shapes"]:
        n = 1
        for d in shape:
            n *= d
        out.append(bucket[at:at + n].reshape(shape))
        at += n
    return tuple(out)


def _chunk(attrs):
    """(offset, length) of this rank's chunk of a bucket."""
    counts, rank = attrs["counts"], attrs["rank"]
    return sum(counts[:rank]), counts[rank]


def _ref_reduce_scatter_wait(args, attrs):
    at, n = _chunk(attrs)
    return _ref_all_reduce_wait((args[0][at:at + n],), attrs)


def _ref_all_gather_start(args, attrs):
    # One process: the bucket is this rank's chunk when the others own
    # nothing in it (the cases' buckets).
    args = args[:-1] if attrs.get("after") else args
    dt = getattr(torch, attrs["dtype"]) if not args else args[0].dtype
    flat = torch.cat([a.flatten() for a in args]) if args else torch.zeros(0, dtype=dt)
    return flat, torch.tensor(-1, dtype=torch.int64)


TRAINSTEP_REFS = {
    "trainstep.all_reduce_start": _ref_all_reduce_start,
    "trainstep.all_reduce_wait": _ref_all_reduce_wait,
    "trainstep.reduce_scatter_start": _ref_all_reduce_start,
    "trainstep.reduce_scatter_wait": _ref_reduce_scatter_wait,
    "trainstep.all_gather_start": _ref_all_gather_start,
    "trainstep.all_gather_wait": _ref_all_reduce_wait,
    "trainstep.max_pool2d_code": _ref_pool_code,
    "trainstep.constant": _ref_constant,
    "trainstep.matmul": _ref_matmul,
    "trainstep.addmm": _ref_addmm_t,
    "trainstep.conv2d_relu": _ref_conv_relu,
    "trainstep.batch_norm_relu": _ref_batch_norm_relu,
    "trainstep.fused_elementwise": _ref_fused,
    "trainstep.batch_norm_epilogue": _ref_bn_epilogue,
    "trainstep.batch_norm_backward_prologue": _ref_bn_prologue,
}


def _squeeze_dims(args, attrs):
    x, r = args[0], max(args[0].dim(), 1)
    dims = []
    for k in attrs["dim"]:
        if not -r <= k < r:
            raise IndexError(f"dim {k} out of range")
        if k % r in dims:
            raise RuntimeError(f"dim {k % r} appears multiple times in the list of dims")
        dims.append(k % r)
    return x.reshape([s for d, s in enumerate(x.shape) if not (s == 1 and d in dims)])


# torch 2.x overloads that torch 1.13 lacks: the same result from 1.13's ops,
# so their cases run under either torch.
NEWER_ATEN_REFS = {"aten.squeeze.dims": _squeeze_dims}


def _gelu_at_inf(out, args, attrs):
    """torch 2.x's vectorised CPU GELU gives NaN at ±inf while its scalar
    path (and 1.13) give the limits: expect the scalar path's value there."""
    x = args[0]
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return out
    inf = x.isinf()
    if not inf.any():
        return out
    out = out.clone()
    for i in inf.flatten().nonzero().flatten().tolist():
        one = x.flatten()[i:i + 1].clone()
        out.view(-1)[i] = call_aten("aten.gelu.default", [one], attrs)[0]
    return out


# Where torch itself is inconsistent: the expected value is fixed up.
ATEN_FIXUPS = {"aten.gelu.default": _gelu_at_inf}


def eval_node(op, args, attrs):
    if op in TRAINSTEP_REFS:
        return TRAINSTEP_REFS[op](args, attrs)
    if op in NEWER_ATEN_REFS and overload(op) is None:
        return NEWER_ATEN_REFS[op](args, attrs)
    out = call_aten(op, args, attrs)
    return ATEN_FIXUPS[op](out, args, attrs) if op in ATEN_FIXUPS else out


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ---------------------------------------------------------------- building

def _type_of(v):
    if isinstance(v, torch.Tensor):
        return {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape)}
    if isinstance(v, (bool, int, float)):  # a wrapped constant, typed as the exporter does
        return {"dtype": _dtype_of_scalar(v), "shape": []}
    return None


def _dtype_of_scalar(v):
    return "bool" if isinstance(v, bool) else "int64" if isinstance(v, int) else "float64"


def build(case, rng):
    """-> (function JSON, {input name: tensor}, [expected outputs]) for a
    Case; for a Neg the expected list is None (torch may refuse it)."""
    prog = case.program
    tensors = {n: (x if isinstance(x, torch.Tensor) else x.make(rng))
               for n, x in prog.inputs.items()}
    env = dict(tensors)
    nodes, fn_inputs, consts = [], [], 0
    for n, t in tensors.items():
        fn_inputs.append({"name": n, "role": "input", "index": len(fn_inputs), **_type_of(t)})
    neg = isinstance(case, Neg)
    torch_error = None
    for k, node in enumerate(prog.nodes):
        attrs = full_attrs(node.op, node.attrs)
        refs, args = [], []
        for r in node.inputs:
            if isinstance(r, Scalar):
                name = f"c{consts}"
                consts += 1
                cattrs = {"value": attr_value(r.value), "dtype": _dtype_of_scalar(r.value),
                          "wrapped": True}
                nodes.append({"name": name, "op": "trainstep.constant", "inputs": [],
                              "attrs": cattrs, "outputs": [name],
                              "types": [{"dtype": cattrs["dtype"], "shape": []}]})
                env[name] = r.value
                r = name
            refs.append(r)
            args.append(None if r is None else env[r])
        name = f"n{k}"
        out = None
        if torch_error is None:
            try:
                out = eval_node(node.op, args, attrs)
            except Exception as e:  # noqa: BLE001 (any torch refusal)
                if not neg:
                    raise AssertionError(f"{case.name}: torch fails on node {name}: {e}") from e
                torch_error = e
        outs = _as_list(out) if out is not None else []
        types = [_type_of(o) for o in outs]
        if neg and (torch_error is not None or not any(types) or
                    (case.types and k == len(prog.nodes) - 1)):
            # torch refused (or cannot say): declare what the case gives.
            types = case.types or [{"dtype": "float32", "shape": []}]
            outs = [None] * len(types)
        names = ([name] if len(types) == 1 else
                 [f"{name}.{j}" if t is not None else None for j, t in enumerate(types)])
        for nm, o in zip(names, outs):
            if nm is not None:
                env[nm] = o
        nodes.append({"name": name, "op": node.op, "inputs": refs, "attrs": attrs,
                      "outputs": names, "types": types})
    last = nodes[-1]
    out_refs = prog.outputs or [n for n in last["outputs"] if n is not None]
    fn_outputs = []
    for i, r in enumerate(out_refs):
        t = _type_of(env.get(r))
        if t is None:  # a failed torch run (Neg) or a non-tensor: use the declared type
            src = next(n for n in nodes if r in n["outputs"])
            t = src["types"][src["outputs"].index(r)]
        fn_outputs.append({"value": r, "role": "output", "index": i, **t})
    fn = {"inputs": fn_inputs, "nodes": nodes, "outputs": fn_outputs}
    if neg:
        case.torch_error = torch_error
        return fn, tensors, None
    if case.ref is not None:
        expected = _as_list(case.ref(*[tensors[n] for n in prog.inputs]))
    else:
        expected = [env[r] for r in out_refs]
    expected = [e if isinstance(e, torch.Tensor) else torch.tensor(e) for e in expected]
    return fn, tensors, expected


# ---------------------------------------------------------------- tables

def collect():
    """Every Case and Neg of every cases_*.py module here, named
    "<op>#<k>" / "<op>!<k>" in table order. A module with a CASE_TAG (e.g.
    "bf16.") numbers its cases apart: "<op>#bf16.<k>", so a module that
    sorts before others does not renumber (and so reseed) their cases."""
    cases, negs = [], []
    pkg = os.path.basename(HERE)
    for m in sorted(pkgutil.iter_modules([HERE]), key=lambda m: m.name):
        if not m.name.startswith("cases_"):
            continue
        mod = importlib.import_module(f"{pkg}.{m.name}")
        for c in mod.cases():
            c.source = f"tests/python/oracle/{m.name}.py"
            c.tag = getattr(mod, "CASE_TAG", "")
            (negs if isinstance(c, Neg) else cases).append(c)
    count = {}
    for c in cases + negs:
        mark = "!" if isinstance(c, Neg) else "#"
        k = count.get((c.op, mark, c.tag), 0)
        count[(c.op, mark, c.tag)] = k + 1
        c.name = f"{c.op}{mark}{c.tag}{k}"
    return cases, negs


def seed_of(name):
    return zlib.crc32(name.encode())


# ---------------------------------------------------------------- running

def write_case_file(path, built):
    """built: [(case name, function JSON, {input: tensor})]."""
    import json
    tensors, listing = {}, []
    for name, fn, ins in built:
        listing.append({"name": name, "function": fn})
        for n, t in ins.items():
            tensors[f"{name}/{n}"] = t
    safetensors_io.save(path, tensors, {"format": "trainstep-cases", "format_version": "1",
                                        "cases": json.dumps(listing)})


def run_cases(binary, case_path, out_path):
    import json
    p = subprocess.run([binary, "run-program", case_path, out_path], capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        raise AssertionError(f"run-program failed ({p.returncode}): {p.stdout}\n{p.stderr}")
    tensors, meta = safetensors_io.load(out_path)
    return json.loads(meta["results"]), tensors


def _bf16_steps(t):
    """bfloat16 values as integers ordered like the values, one per
    representable step (+0 and -0 both 0)."""
    b = t.contiguous().view(torch.int16).to(torch.int64) & 0xFFFF
    return torch.where(b >= 0x8000, -(b & 0x7FFF), b)


def _bf16_ulp(x):
    """The spacing of bfloat16 numbers at magnitude x (float64 tensor)."""
    tiny = 2.0 ** -133  # the smallest subnormal step
    e = torch.floor(torch.log2(torch.clamp(x.abs(), min=2.0 ** -126)))
    return torch.clamp(torch.exp2(e - 7), min=tiny)


def close_bf16(got, want, ulp=0, ulp_scale=0, tol=None):
    """None if got matches want, else a one-line description. NaN matches
    any NaN (torch's vector loops give 0xFFFF, its scalar path 0x7FC0);
    otherwise the bits must be equal, unless ulp / ulp_scale / tol allow a
    difference: within `ulp` representable steps of torch's value, within
    ulp_scale * (bfloat16 ulp of the output's largest finite magnitude), or
    within a case's explicit tol = (rtol, atol). Infinities must match
    exactly either way."""
    g, w = got.float().double().reshape(-1), want.float().double().reshape(-1)
    gn, wn = torch.isnan(g), torch.isnan(w)
    gb = got.contiguous().view(torch.int16).reshape(-1)
    wb = want.contiguous().view(torch.int16).reshape(-1)
    ok = (gn & wn) | (~gn & ~wn & (gb == wb))
    finite = ~gn & ~wn & torch.isfinite(g) & torch.isfinite(w)
    if ulp:
        steps = (_bf16_steps(got).reshape(-1) - _bf16_steps(want).reshape(-1)).abs()
        ok |= finite & (steps <= ulp)
    if tol is not None:
        rtol, atol = tol
        ok |= finite & ((g - w).abs() <= atol + rtol * w.abs())
    if ulp_scale:
        wf = w[torch.isfinite(w)]
        scale = float(wf.abs().max()) if wf.numel() else 0.0
        bound = ulp_scale * float(_bf16_ulp(torch.tensor(scale, dtype=torch.float64)))
        ok |= finite & ((g - w).abs() <= bound)
    if ok.all():
        return None
    bad = ~ok
    i = int(bad.nonzero()[0])
    rule = ("bitwise" if not (ulp or ulp_scale or tol) else
            f"ulp {ulp}, ulp_scale {ulp_scale}" + (f", tol {tol}" if tol else ""))
    return (f"{int(bad.sum())} of {want.numel()} bfloat16 elements differ ({rule}); first at "
            f"flat {i}: {g[i].item()!r} (0x{int(gb[i]) & 0xFFFF:04x}) vs torch {w[i].item()!r} "
            f"(0x{int(wb[i]) & 0xFFFF:04x})")


def close(got, want, tol, ulp=0, ulp_scale=0):
    """None if equal within tol (bfloat16: ulp, ulp_scale), else a one-line
    description."""
    if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
        return f"got {got.dtype}{list(got.shape)}, torch gives {want.dtype}{list(want.shape)}"
    if got.numel() == 0:
        return None
    if want.dtype == torch.bfloat16:
        return close_bf16(got, want, ulp, ulp_scale, tol)
    if not want.dtype.is_floating_point:
        bad = (got != want)
        if bad.any():
            i = int(bad.reshape(-1).nonzero()[0])
            return (f"{int(bad.sum())} of {want.numel()} elements differ; first at flat {i}: "
                    f"{got.reshape(-1)[i].item()} vs {want.reshape(-1)[i].item()}")
        return None
    rtol, atol = tol or DEFAULT_TOL[want.dtype]
    g, w = got.double(), want.double()
    nan_ok = torch.isnan(g) == torch.isnan(w)
    same_inf = (g == w)  # equal infinities (and exact matches)
    err = torch.where(same_inf | torch.isnan(w), torch.zeros_like(g), (g - w).abs())
    bad = ~nan_ok | torch.isnan(err) | (err > atol + rtol * w.abs())
    if bad.any():
        i = int(bad.reshape(-1).nonzero()[0])
        return (f"{int(bad.sum())} of {want.numel()} elements off (rtol {rtol}, atol {atol}); "
                f"first at flat {i}: {g.reshape(-1)[i].item()!r} vs torch {w.reshape(-1)[i].item()!r}; "
                f"max err {float(err[~torch.isnan(err)].max()) if (~torch.isnan(err)).any() else math.nan:.3e}")
    return None
