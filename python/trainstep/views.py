"""Strided reads the runtime can run: as_strided of a non-contiguous value.

torch's as_strided addresses its input's *storage*; the runtime keeps every
value dense in logical order, so its as_strided is right only for a
contiguous input that starts its storage. Functionalize on 1.13 leaves
as_strided over a transposed value where user code slices one
(mnist_rnn's `output[:, -1, :]` of an LSTM output). Such a node becomes
reads of a rebuilt storage, from ops the runtime has:

    ids  = arange(S)                                  storage positions
    pos  = as_strided(ids, x.shape, x.stride(), x.offset)   x's position of each element
    buf  = index_put(full([S], 0), [clone(pos).view(-1)], clone(x).view(-1))
    out  = as_strided(buf, size, stride, offset)

It applies only where every position the node reads belongs to x (torch
would otherwise read storage outside the value, which no graph value
holds); other nodes stay, and serialize refuses them with the source line.
"""
import torch
import torch.fx

A = torch.ops.aten


def _positions(shape, stride, offset):
    """The storage position of each element of a strided view, flattened."""
    n = 1
    for d in shape:
        n *= d
    if n == 0:
        return torch.zeros(0, dtype=torch.int64)
    span = offset + sum((d - 1) * s for d, s in zip(shape, stride)) + 1
    return torch.arange(span).as_strided(shape, stride, offset).reshape(-1)


def _inputs_of(gm, nodes, example):
    """Each node's first argument's value when the graph runs on example."""
    seen = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            if n in nodes:
                x = self.fetch_args_kwargs_from_env(n)[0][0]
                seen[n] = (tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.dtype,
                           x.is_contiguous())
            return super().run_node(n)

    Recorder(gm).run(*[t.detach().clone() for t in example])
    return seen


def densify(gm, example):
    """Rewrites the graph's as_strided nodes over non-contiguous values in
    place (see the module docstring)."""
    g = gm.graph
    nodes = {n for n in g.nodes if n.op == "call_function" and n.target is A.as_strided.default}
    if not nodes:
        return
    changed = False
    for n, (shape, xstride, xoff, dtype, contiguous) in _inputs_of(gm, nodes, example).items():
        if contiguous and xoff == 0:
            continue
        size, stride = list(n.args[1]), list(n.args[2])
        off = n.args[3] if len(n.args) > 3 and n.args[3] is not None else 0
        x_pos = _positions(shape, xstride, xoff)
        want = _positions(size, stride, off)
        if want.numel() and not bool(torch.isin(want, x_pos).all()):
            continue
        span = int(max(int(x_pos.max()) if x_pos.numel() else 0,
                       int(want.max()) if want.numel() else 0)) + 1
        x = n.args[0]
        with g.inserting_before(n):
            ids = g.call_function(A.arange.default, (span,), {"dtype": torch.int64})
            pos = g.call_function(A.as_strided.default, (ids, list(shape), list(xstride), xoff))
            # torch's values are strided here (the runtime's are dense): view copies
            dense_pos = g.call_function(A.clone.default, (pos,),
                                        {"memory_format": torch.contiguous_format})
            flat_pos = g.call_function(A.view.default, (dense_pos, [-1]))
            dense = g.call_function(A.clone.default, (x,),
                                    {"memory_format": torch.contiguous_format})
            flat_x = g.call_function(A.view.default, (dense, [-1]))
            zeros = g.call_function(A.full.default, ([span], 0), {"dtype": dtype})
            buf = g.call_function(A.index_put.default, (zeros, [flat_pos], flat_x))
            out = g.call_function(A.as_strided.default, (buf, size, stride, off))
        for new in (ids, pos, dense_pos, flat_pos, dense, flat_x, zeros, buf, out):
            new.meta.update({k: v for k, v in n.meta.items() if k != "val"})
        n.replace_all_uses_with(out)
        g.erase_node(n)
        changed = True
    if changed:
        gm.recompile()
