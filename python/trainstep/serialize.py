"""FX graph -> the artifact's function JSON (docs/format.md, "Functions").

Every call node becomes {op, inputs, attrs, outputs, types}. Arguments are
split by the op's ATen schema: tensor arguments are inputs (by value name,
null when absent), everything else is an attribute under its schema name.
A Python number passed where the schema wants a Tensor becomes a
`trainstep.constant` node (a 0-d "wrapped" scalar, as PyTorch treats it).
"""
import math
import operator

import torch
import torch.fx

from .capture import CaptureError

from . import provenance


def _dtype_name(dt):
    return str(dt).replace("torch.", "")


def attr_value(v):
    if isinstance(v, torch.dtype):
        return _dtype_name(v)
    if isinstance(v, (torch.device, torch.layout, torch.memory_format)):
        return None
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [attr_value(x) for x in v]
    raise TypeError(f"cannot serialise attribute value {v!r} ({type(v).__name__})")


class _Recorder(torch.fx.Interpreter):
    """Runs the graph once on the example inputs to record each value's
    dtype and shape (and optionally the values themselves)."""

    def __init__(self, gm, keep_values=False):
        super().__init__(gm)
        self.types = {}
        self.values = {} if keep_values else None
        self.bad_view = None  # the first as_strided the runtime cannot reproduce

    def run_node(self, n):
        if n.op == "call_function" and n.target is torch.ops.aten.as_strided.default \
                and self.bad_view is None:
            self.bad_view = _strided_view_problem(n, self.fetch_args_kwargs_from_env(n)[0][0])
        out = super().run_node(n)
        vals = out if isinstance(out, (tuple, list)) else [out]
        self.types[n] = [({"dtype": _dtype_name(v.dtype), "shape": list(v.shape)}
                          if isinstance(v, torch.Tensor) else None) for v in vals]
        if self.values is not None and n.op == "call_function":
            self.values[n] = out
        return out


def node_values(captured, flat_inputs):
    """Every node output's value, under its value name in the function JSON,
    when the graph runs on flat_inputs (signature order): the eager trace
    that `trainstep verify --trace` compares node by node."""
    rec = _Recorder(captured.graph, keep_values=True)
    rec.run(*[t.detach().clone() for t in flat_inputs])
    out = {}
    for n, v in rec.values.items():
        if not isinstance(v, torch.Tensor):
            continue  # a multi-output node: its getitems carry the values
        name = f"{n.args[0].name}.{n.args[1]}" if n.target is operator.getitem else n.name
        out[name] = v.detach().clone()
    return out


def _strided_view_problem(n, x):
    """The runtime's as_strided reads its input's own dense buffer; torch's
    reads the input's storage. They agree only for a contiguous input that
    starts its storage (functionalize's split/chunk of a fresh tensor).
    Returns the error message, or None."""
    if x.is_contiguous() and x.storage_offset() == 0:
        return None
    src = provenance.of_node(n)
    return (f"node {n.name} (aten.as_strided.default) reads a strided view (strides "
            f"{list(x.stride())}, storage offset {x.storage_offset()}): only views of a "
            "contiguous tensor are supported (e.g. split() a contiguous tensor)"
            + (f"; from {provenance.describe(src)}" if src else ""))


def source_of(n):
    """Where the node came from (python/trainstep/provenance.py), as the
    node's JSON "source" object, or None."""
    src = provenance.of_node(n)
    return src or None


def grads_apart(fn):
    """train_step's gradient results moved from "outputs" to "grads": they
    name each parameter's gradient value without making it a result the
    runtime must keep (docs/format.md)."""
    fn["grads"] = [o for o in fn["outputs"] if o["role"] == "grad"]
    fn["outputs"] = [o for o in fn["outputs"] if o["role"] != "grad"]
    return fn


def serialize_function(captured, keep_values=False):
    gm, sig = captured.graph, captured.signature
    rec = _Recorder(gm, keep_values)
    rec.run(*[t.detach().clone() for t in captured.example])
    if rec.bad_view:
        raise CaptureError(rec.bad_view)

    names = {}
    nodes = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(sig.inputs):
        raise AssertionError("placeholder count does not match the signature")
    for ph, spec in zip(placeholders, sig.inputs):
        names[ph] = spec["name"]
    # Ports carry the user's names (a forward parameter may be called "t"
    # or "mm"), so a node named like a port takes a suffix.
    taken = set(names.values())

    def fresh(name):
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    n_const = 0

    def ref(v):
        nonlocal n_const
        if v is None:
            return None
        if isinstance(v, torch.fx.Node):
            return names[v]
        if isinstance(v, (bool, int, float)):
            dtype = "bool" if isinstance(v, bool) else "int64" if isinstance(v, int) else "float64"
            name = fresh(f"const{n_const}")
            n_const += 1
            nodes.append({"name": name, "op": "trainstep.constant", "inputs": [],
                          "attrs": {"value": attr_value(v), "dtype": dtype, "wrapped": True},
                          "outputs": [name], "types": [{"dtype": dtype, "shape": []}]})
            return name
        raise TypeError(f"unexpected tensor argument {v!r}")

    getitems = {}
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is operator.getitem:
            getitems.setdefault(n.args[0], {})[n.args[1]] = n

    for n in gm.graph.nodes:
        if n.op == "get_attr":
            raise TypeError(f"the step captured a tensor constant ({n.target}); "
                            "create tensors from inputs instead (e.g. torch.zeros_like)")
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        schema = n.target._schema
        inputs, attrs = [], {}
        for i, a in enumerate(schema.arguments):
            if i < len(n.args) and not a.kwarg_only:
                v = n.args[i]
            elif a.name in n.kwargs:
                v = n.kwargs[a.name]
            elif a.has_default_value():
                v = a.default_value
            else:
                v = None
            if "Tensor" in str(a.type):
                if isinstance(v, (list, tuple)):
                    inputs.extend(ref(x) for x in v)
                else:
                    inputs.append(ref(v))
            else:
                attrs[a.name] = attr_value(v)
        types = rec.types[n]
        node_name = fresh(n.name)
        if n in getitems:
            outs = [None] * len(types)
            for idx, gi in getitems[n].items():
                outs[idx] = fresh(f"{node_name}.{idx}")
                names[gi] = outs[idx]
        else:
            outs = [node_name]
            names[n] = node_name
        node = {"name": node_name, "op": str(n.target), "inputs": inputs, "attrs": attrs,
                "outputs": outs, "types": types}
        src = source_of(n)
        if src:
            node["source"] = src
        nodes.append(node)

    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    results = out_node.args[0]
    if len(results) != len(sig.outputs):
        raise AssertionError("output count does not match the signature")
    outputs = []
    for r, spec in zip(results, sig.outputs):
        outputs.append({"value": names[r], **spec, **rec.types[r][0]})
    fn = {"inputs": sig.inputs, "outputs": outputs, "nodes": nodes}
    if keep_values:
        return fn, {names.get(n, n.name): v for n, v in rec.values.items()}
    return fn
