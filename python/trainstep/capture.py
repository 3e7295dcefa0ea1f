"""Capture the whole training step (and an eval step) as functional FX graphs.

Recipe (docs/ARCHITECTURE.md, "Capture"): one Python function takes every
piece of state as an explicit tensor argument, runs the model through
functional_call inside grad_and_value, applies our out-of-place optimizer,
and returns the loss plus every new state tensor. make_fx(functionalize(…))
with ATen decompositions traces it to a graph with no mutation.
"""
import contextlib
from dataclasses import dataclass

import torch

from . import optim as ts_optim
from . import patches, provenance, rng
from .compat import decomposition_table, functional_call, functionalize, grad_and_value, make_fx, vmap

# Ops that only alias or copy; dropped so the graph is purely functional.
_ALIASES = {"aten.alias.default", "aten.detach.default", "aten.lift_fresh_copy.default"}


class CaptureError(Exception):
    pass


@dataclass
class Signature:
    """Role of each flat graph input / output (see docs/format.md)."""
    inputs: list   # dicts: name, role, [state], dtype, shape
    outputs: list  # dicts: role, [state]


@dataclass
class Captured:
    graph: torch.fx.GraphModule
    signature: Signature
    example: list  # flat example inputs, in signature order


def tensor_meta(t):
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}


class StepParts:
    """The user's model split into named state, plus the functional optimizer."""

    def __init__(self, spec):
        self.spec = spec
        self.model = spec.model
        named = dict(self.model.named_parameters())
        self.params = {n: p for n, p in named.items() if p.requires_grad}
        self.frozen = {n: p for n, p in named.items() if not p.requires_grad}
        self.buffers = dict(self.model.named_buffers())
        self.opt = ts_optim.from_torch(spec.optimizer)
        self.pnames = list(self.params)
        trainable = [p for g in spec.optimizer.param_groups for p in g["params"]]
        if len(trainable) != len(self.params) or any(
                a is not b for a, b in zip(trainable, self.params.values())):
            raise CaptureError("the optimizer must be built on model.parameters() "
                               "(same parameters, same order, all trainable)")
        self.opt_state = self.opt.state_from_torch(spec.optimizer, self.pnames) \
            if spec.optimizer.state else self.opt.init_state(self.params)
        self.inputs = list(spec.example_inputs)
        self.target = spec.example_target

    def state(self):
        """Initial state: name -> (kind, tensor), in signature order."""
        out = {}
        for n, t in self.params.items():
            out[n] = ("param", t)
        for n, t in self.frozen.items():
            out[n] = ("frozen", t)
        for n, t in self.buffers.items():
            out[n] = ("buffer", t)
        for n, t in self.opt_state.items():
            out[n] = ("optim", t)
        return {n: (k, t.detach().clone()) for n, (k, t) in out.items()}


def _state_inputs(names, kind, tensors):
    return [dict(name=f"state/{n}", role="state", state=n, kind=kind, **tensor_meta(tensors[n]))
            for n in names]


def capture_train(parts):
    p = parts
    bnames, fnames, snames = list(p.buffers), list(p.frozen), list(p.opt_state)
    n_in = len(p.inputs)
    lr = torch.tensor(p.opt.base_lr, dtype=torch.float32)
    seed = torch.tensor(0, dtype=torch.int64)
    offset = torch.tensor(0, dtype=torch.int64)

    def step(*flat):
        it = iter(flat)
        params = {n: next(it) for n in p.pnames}
        frozen = {n: next(it) for n in fnames}
        buffers = {n: next(it) for n in bnames}
        ostate = {n: next(it) for n in snames}
        lr_, seed_, offset_ = next(it), next(it), next(it)
        inputs = [next(it) for _ in range(n_in)]
        target = next(it)

        def loss_of(ps):
            # Buffers are cloned so in-place updates (BatchNorm running
            # stats) become new values we can return.
            bufs = {n: b.clone() for n, b in buffers.items()}
            out = functional_call(p.model, {**ps, **frozen, **bufs}, tuple(inputs))
            loss = p.spec.loss_fn(out, target)
            return loss, bufs

        with rng.stream(seed_, offset_):
            grads, (loss, new_bufs) = grad_and_value(loss_of, has_aux=True)(params)
        new_p, new_s = p.opt.update(params, grads, ostate, lr_)
        return (loss, *[new_p[n] for n in p.pnames], *[new_bufs[n] for n in bnames],
                *[new_s[n] for n in snames])

    st = {**p.params, **p.frozen, **p.buffers, **p.opt_state}
    sig_in = (_state_inputs(p.pnames, "param", st) + _state_inputs(fnames, "frozen", st)
              + _state_inputs(bnames, "buffer", st) + _state_inputs(snames, "optim", st)
              + [dict(name="lr", role="lr", **tensor_meta(lr)),
                 dict(name="rng_seed", role="rng_seed", **tensor_meta(seed)),
                 dict(name="rng_offset", role="rng_offset", **tensor_meta(offset))]
              + _data_inputs(p))
    sig_out = ([dict(role="loss")] + [dict(role="state", state=n) for n in p.pnames]
               + [dict(role="state", state=n) for n in bnames]
               + [dict(role="state", state=n) for n in snames])
    example = ([st[n] for n in p.pnames + fnames + bnames + snames] + [lr, seed, offset]
               + p.inputs + [p.target])
    with _mode(p.model, True), provenance.recording(p.model):
        gm = _trace(step, example)
    return Captured(gm, Signature(sig_in, sig_out), example)


def _data_inputs(p):
    return ([dict(name=f"input{i}", role="input", index=i, **tensor_meta(x))
             for i, x in enumerate(p.inputs)]
            + [dict(name="target", role="target", **tensor_meta(p.target))])


def capture_eval(parts):
    """eval_step: model.eval() outputs and the per-sample loss (so the C++
    side can mask a padded last batch)."""
    p = parts
    names = p.pnames + list(p.frozen) + list(p.buffers)
    st = {**p.params, **p.frozen, **p.buffers}
    kinds = {**{n: "param" for n in p.pnames}, **{n: "frozen" for n in p.frozen},
             **{n: "buffer" for n in p.buffers}}
    n_in = len(p.inputs)

    def per_sample_loss(o, t):
        return p.spec.loss_fn(o.unsqueeze(0), t.unsqueeze(0))

    def step(*flat):
        it = iter(flat)
        state = {n: next(it) for n in names}
        inputs = [next(it) for _ in range(n_in)]
        target = next(it)
        out = functional_call(p.model, state, tuple(inputs))
        if not isinstance(out, torch.Tensor):
            raise CaptureError("the model must return one tensor")
        losses = vmap(per_sample_loss)(out, target)
        return out, losses

    sig_in = [dict(name=f"state/{n}", role="state", state=n, kind=kinds[n], **tensor_meta(st[n]))
              for n in names] + _data_inputs(p)
    sig_out = [dict(role="output", index=0), dict(role="sample_loss")]
    example = [st[n] for n in names] + p.inputs + [p.target]
    with _mode(p.model, False), provenance.recording(p.model):
        gm = _trace(step, example)
    return Captured(gm, Signature(sig_in, sig_out), example)


@contextlib.contextmanager
def _mode(model, training):
    was = model.training
    model.train(training)
    try:
        yield
    finally:
        model.train(was)


def _trace(fn, example):
    # Real-mode tracing executes the step: trace on clones so the user's
    # tensors are untouched.
    clones = [t.detach().clone() for t in example]
    with patches.applied():
        gm = make_fx(functionalize(fn), decomposition_table=decomposition_table())(*clones)
    _clean(gm)
    return gm


def _clean(gm):
    g = gm.graph
    for n in list(g.nodes):
        if n.op != "call_function":
            continue
        name = str(n.target)
        if name in _ALIASES:
            n.replace_all_uses_with(n.args[0])
            g.erase_node(n)
        elif name == "prims.convert_element_type.default":
            with g.inserting_before(n):
                new = g.call_function(torch.ops.aten._to_copy.default, (n.args[0],),
                                      {"dtype": n.args[1]})
            n.replace_all_uses_with(new)
            g.erase_node(n)
        elif name == "aten.fill.Scalar":
            _fill_to_full_like(g, n)
    g.eliminate_dead_code()
    for n in g.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) \
                and n.target._schema.is_mutable:
            raise CaptureError(f"in-place op {n.target} left in the graph after functionalize")
    gm.recompile()



def _fill_to_full_like(g, n):
    """fill(t, v) is a t-shaped tensor of v. Functionalize writes full_like
    as fill(empty_like(x), v) (silu_backward's `1 - sigmoid` does): read the
    shape from x then, so the empty tensor goes away."""
    src, dtype = n.args[0], None
    if isinstance(src, torch.fx.Node) and src.target == torch.ops.aten.empty_like.default:
        dtype = src.kwargs.get("dtype")
        src = src.args[0]
    with g.inserting_before(n):
        new = g.call_function(torch.ops.aten.full_like.default, (src, n.args[1]), {"dtype": dtype})
    new.meta = dict(n.meta)
    n.replace_all_uses_with(new)
    g.erase_node(n)
