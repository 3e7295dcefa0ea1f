"""Graph rewrites: the traced graph cleaned into the ops the runtime takes
(the pipeline's fourth stage, after decompositions.py; see capture.py).

`clean(gm)` runs, in order: constants the step reached outside its inputs
become values of the graph (or are refused), profiler ranges go, then one
loop over the nodes applies REWRITES, a table from op name to its rewrite;
last, outputs that are clones of inputs become those inputs and dead code
goes.
"""
import torch

from . import provenance
from .errors import CaptureError


def clean(gm):
    """Rewrites gm's graph in place (module docstring: the order)."""
    g = gm.graph
    # Before the loop: _constants knows a lifted literal by its alias /
    # lift_fresh_copy users, which the loop drops.
    _constants(gm)
    _drop_profiler(g)
    for n in list(g.nodes):  # nodes a rewrite inserts are not visited again
        if n.op != "call_function":
            continue
        rewrite = REWRITES.get(str(n.target))
        if rewrite is not None:
            rewrite(g, n)
    # After the loop: an output it left as a clone of an input (its alias
    # or detach dropped) is found too; then what nothing reads goes.
    _unclone_outputs(g)
    g.eliminate_dead_code()
    gm.recompile()


# --- constants ------------------------------------------------------------

# Ops whose result depends only on their first argument's dtype and shape,
# and the fill value each gives (index into args, or a constant).
_FROM_METADATA = {"aten.new_zeros.default": 0, "aten.new_ones.default": 1,
                  "aten.new_empty.default": 0, "aten.new_full.default": ("arg", 2),
                  "aten.zeros_like.default": 0, "aten.ones_like.default": 1,
                  "aten.empty_like.default": 0, "aten.full_like.default": ("arg", 1)}


# What tracing wraps a Python number in when the code writes it into a tensor.
_LIFTED = {"aten.alias.default", "aten.lift_fresh_copy.default", "aten.lift_fresh.default"}


def _constants(gm):
    """Tensors the step reached outside its inputs become graph constants
    (get_attr). The usual one is `weight = next(self.parameters());
    weight.new_zeros(...)` (pytorch/examples' init_hidden): the parameter is
    used only for its dtype, so those uses become full(size, value). Any
    other use is refused with the source line: a parameter read that way
    would get no gradient, and a plain tensor attribute is not state. A
    lifted 0-d constant is a Python number written into a tensor, and
    becomes full([], value)."""
    g = gm.graph
    for c in [n for n in g.nodes if n.op == "get_attr"]:
        for u in list(c.users):
            fill = _FROM_METADATA.get(str(u.target)) if u.op == "call_function" else None
            if fill is None or u.args[0] is not c:
                continue
            shape, dtype = _meta(u)
            if shape is None:
                continue
            value = u.args[fill[1]] if isinstance(fill, tuple) else fill
            with g.inserting_before(u):
                new = g.call_function(torch.ops.aten.full.default, (shape, value), {"dtype": dtype})
            _replace(u, new)
        if not c.users:
            g.erase_node(c)
            continue
        t = getattr(gm, c.target)
        if all(str(u.target) in _LIFTED for u in c.users) and t.numel() <= _MAX_LITERAL:
            # A tensor the step made from Python literals (swin's
            # `attn_mask[h, w] = count`, a lifted 0-d constant; transformers'
            # KV cache `torch.tensor([])`): a value of the graph, not state.
            with g.inserting_before(c):
                new = _literal(g, t)
            c.replace_all_uses_with(new)
            g.erase_node(c)
            continue
        use = next(iter(c.users))
        src = provenance.of_node(use)
        where = f"{src['file']}:{src['line']}" if "file" in src else None
        at = f" (in {provenance.describe(src)})" if src else ""
        what = f"shape {list(t.shape)}, {str(t.dtype).replace('torch.', '')}"
        if isinstance(t, torch.nn.Parameter):
            raise CaptureError(
                f"a parameter ({what}) is read other than through its module's attribute, e.g. "
                f"by next(self.parameters()) or a reference kept elsewhere, so its gradient "
                f"would be lost{at}. Read it as the module's attribute (self.layer.weight), or "
                f"use it only for its dtype and shape (new_zeros, zeros_like)", where)
        raise CaptureError(
            f"the step uses a tensor that is neither an input, a parameter nor a buffer "
            f"({what}), a constant it could not update or checkpoint{at}. Register it with "
            f"self.register_buffer(name, tensor), or make it an nn.Parameter", where)


# Elements of a tensor literal written into the graph element by element
# (one full node each); a larger one that is not uniform must be a buffer.
_MAX_LITERAL = 64


def _literal(g, t):
    """Nodes that make tensor literal t: full() when it is empty or
    uniform, else its elements as full() nodes concatenated and viewed."""
    aten = torch.ops.aten
    flat = t.detach().reshape(-1)
    if flat.numel() == 0 or bool((flat == flat[0]).all()):
        value = flat[0].item() if flat.numel() else 0
        return g.call_function(aten.full.default, (list(t.shape), value), {"dtype": t.dtype})
    parts = [g.call_function(aten.full.default, ([1], v.item()), {"dtype": t.dtype})
             for v in flat]
    cat = g.call_function(aten.cat.default, (parts,))
    return g.call_function(aten.view.default, (cat, list(t.shape)))


# --- profiler ranges ------------------------------------------------------

# torch.optim's step() runs inside a profiler range (record_function): no
# value, dropped.
_PROFILER = ("profiler._record_function_exit", "profiler._record_function_enter")


def _drop_profiler(g):
    for prefix in _PROFILER:  # each exit, then the enter it used
        for n in [n for n in g.nodes if str(n.target).startswith(prefix) and not n.users]:
            g.erase_node(n)


# --- the table's rewrites, one node each ----------------------------------

def _drop_alias(g, n):
    """An op that only aliases or copies: its input, so the graph is
    purely functional."""
    n.replace_all_uses_with(n.args[0])
    g.erase_node(n)


def _convert_to_copy(g, n):
    """prims.convert_element_type, which decompositions may emit, as
    aten._to_copy (the runtime takes no prims.*)."""
    with g.inserting_before(n):
        new = g.call_function(torch.ops.aten._to_copy.default, (n.args[0],),
                              {"dtype": n.args[1]})
    n.replace_all_uses_with(new)
    g.erase_node(n)


def _fill_to_full_like(g, n):
    """fill(t, v) is a t-shaped tensor of v. Functionalize writes full_like
    as fill(empty_like(x), v) (silu_backward's `1 - sigmoid` does), and 2.x
    as fill(empty_permuted(size), v): read the shape from x, or take the
    size, so the empty tensor goes away."""
    src, dtype = n.args[0], None
    aten = torch.ops.aten
    if _is_empty_permuted(src):
        _full_of_size(g, n, src, n.args[1])
        return
    if isinstance(src, torch.fx.Node) and src.target == aten.empty_like.default:
        dtype = src.kwargs.get("dtype")
        src = src.args[0]
    with g.inserting_before(n):
        new = g.call_function(aten.full_like.default, (src, n.args[1]), {"dtype": dtype})
    _replace(n, new)


def _full_like_of_empty(g, n):
    """full_like(empty_permuted(size), v) (2.x) as full(size, v); any other
    full_like stays."""
    if _is_empty_permuted(n.args[0]):
        _full_of_size(g, n, n.args[0], n.args[1])


def _copy_to_value(g, n):
    """copy(dst, src) out of place is src cast to dst's dtype and broadcast
    to its shape: 2.x leaves it where a patch writes a buffer in place
    (BatchNorm's running stats: patches.batch_norm)."""
    dst, src = n.args[0], n.args[1]
    (dshape, ddtype), (sshape, sdtype) = _meta(dst), _meta(src)
    if dshape is None or sshape is None:
        return  # left in place: the op check names it
    aten = torch.ops.aten
    new = src
    with g.inserting_before(n):
        if sshape != dshape:
            new = g.call_function(aten.expand.default, (new, dshape))
        if sdtype != ddtype:
            new = g.call_function(aten._to_copy.default, (new,), {"dtype": ddtype})
    if new is src:
        n.replace_all_uses_with(src)
        g.erase_node(n)
    else:
        _replace(n, new)


def _bool_logic(g, n):
    """A _BOOL_LOGIC op on bool masks as the runtime's op; on other dtypes
    it stays."""
    if _meta(n)[1] != torch.bool:
        return
    aten = torch.ops.aten
    name = str(n.target)
    if name.endswith("_not.default"):
        target, args = aten.eq.Scalar, (n.args[0], False)
    else:
        target = {"and": aten.mul.Tensor, "or": aten.add.Tensor,
                  "xor": aten.ne.Tensor}[name.split(".")[1].split("_")[1]]
        args = tuple(n.args[:2])
    if any(isinstance(a, torch.fx.Node) and _meta(a)[1] != torch.bool for a in args):
        return  # an integer operand: left for the op check to name
    with g.inserting_before(n):
        new = g.call_function(target, args)
    _replace(n, new)


# Ops that only alias or copy; dropped so the graph is purely functional.
_ALIASES = {"aten.alias.default", "aten.detach.default", "aten.lift_fresh_copy.default"}
# 2.x writes logic on bool masks as bitwise ops; on bool they are the
# runtime's mul (and), add (or), ne (xor) and eq False (not).
_BOOL_LOGIC = {"aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor",
               "aten.bitwise_not.default", "aten.logical_not.default",
               "aten.logical_and.default", "aten.logical_or.default", "aten.logical_xor.default"}

# Op name -> its rewrite (graph, node), applied once per node by `clean`.
REWRITES = {
    **{name: _drop_alias for name in _ALIASES},
    "prims.convert_element_type.default": _convert_to_copy,
    "aten.fill.Scalar": _fill_to_full_like,
    "aten.full_like.default": _full_like_of_empty,
    "aten.copy.default": _copy_to_value,
    **{name: _bool_logic for name in _BOOL_LOGIC},
}


# --- after the loop -------------------------------------------------------

def _unclone_outputs(g):
    """An output that is a clone of an input is that input: a buffer the
    step leaves alone (the step clones every buffer so BatchNorm can write
    it) then passes through, with no copy per step."""
    out = next(n for n in g.nodes if n.op == "output")

    def through(v):
        if (isinstance(v, torch.fx.Node) and v.op == "call_function"
                and v.target == torch.ops.aten.clone.default and not v.kwargs
                and isinstance(v.args[0], torch.fx.Node) and v.args[0].op == "placeholder"):
            return v.args[0]
        return v
    out.args = (tuple(through(v) for v in out.args[0]),) if isinstance(out.args[0], (tuple, list)) \
        else (through(out.args[0]),)


# --- helpers --------------------------------------------------------------

def _is_empty_permuted(src):
    """2.x's empty_like of a row-major tensor: empty_permuted(size, 0..n-1)."""
    return (isinstance(src, torch.fx.Node) and hasattr(torch.ops.aten, "empty_permuted")
            and src.target == torch.ops.aten.empty_permuted.default
            and list(src.args[1]) == list(range(len(src.args[0]))))


def _full_of_size(g, n, empty, value):
    """n (fill or full_like of an empty_permuted) as full(size, value)."""
    dtype = n.kwargs.get("dtype") or empty.kwargs.get("dtype")
    with g.inserting_before(n):
        new = g.call_function(torch.ops.aten.full.default, (list(empty.args[0]), value),
                              {"dtype": dtype})
    _replace(n, new)


def _replace(n, new):
    new.meta = dict(n.meta)
    n.replace_all_uses_with(new)
    n.graph.erase_node(n)


def _meta(n):
    """(shape, dtype) of a node's value as tracing recorded it (2.x: 'val';
    1.13: 'tensor_meta'), or (None, None)."""
    m = n.meta.get("val", n.meta.get("tensor_meta")) if isinstance(n, torch.fx.Node) else None
    if m is None or not hasattr(m, "shape"):
        return None, None
    return list(m.shape), m.dtype
