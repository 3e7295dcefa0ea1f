"""Capture the whole training step (and an eval step) as functional FX graphs.

Recipe (docs/ARCHITECTURE.md, "Capture"): one Python function takes every
piece of state as an explicit tensor argument, runs the model through
functional_call inside grad_and_value, applies our out-of-place optimizer,
and returns the loss plus every new state tensor. make_fx(functionalize(…))
with ATen decompositions traces it to a graph with no mutation.
"""
import contextlib
import copy
import functools
import math
from dataclasses import dataclass

import torch

from . import capture_errors
from . import optim as ts_optim
from . import batch, caches, environment, patches, provenance, pytree, rng, rnn, scalars
from . import traced_optim, views
from .signature import StepInputs, StepOutputs, tensor_meta
from .compat import decomposition_table, functional_call, mkldnn_off, functionalize, grad_and_value, make_fx, vmap

# Ops that only alias or copy; dropped so the graph is purely functional.
_ALIASES = {"aten.alias.default", "aten.detach.default", "aten.lift_fresh_copy.default"}
# torch.optim's step() runs inside a profiler range (record_function): no
# value, dropped.
_PROFILER = ("profiler._record_function_exit", "profiler._record_function_enter")


CaptureError = capture_errors.CaptureError


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


def json_float(v):
    """A float for the program JSON (non-finite ones as strings, docs/format.md)."""
    return repr(v) if not math.isfinite(v) else v


class StepParts:
    """The user's model split into named state, plus the functional optimizer.

    State names are the model's named_parameters()/named_buffers() names (one
    per tensor); `aliases` maps the other state_dict names of a shared tensor
    (tied weights) to that name. `params` are the parameters the step
    updates: in the optimizer, requires_grad, and reached by the loss's
    gradient. Every other parameter is `frozen` (not updated, no optimizer
    state), as torch.optim skips a parameter whose .grad is None.
    """

    def __init__(self, spec):
        self.spec = spec
        self.model = spec.model
        # Tensors forward caches in plain attributes are recomputed by every
        # step, not captured as constants (caches.py).
        self.caches = caches.CacheWatch(self.model)
        # The batch's tensor leaves (pytree.Example): model inputs and the
        # target may be dicts, tuples, dataclasses of tensors.
        self.example = batch.example(spec)
        self.inputs = list(self.example.input_leaves)
        self.targets = list(self.example.target_leaves)
        self.layout = batch.resolve(spec)
        named = dict(self.model.named_parameters())
        self.buffers = dict(self.model.named_buffers())
        self.aliases = _aliases(self.model)
        name_of = {id(p): n for n, p in named.items()}
        groups = []
        for i, g in enumerate(spec.optimizer.param_groups):
            for p in g["params"]:
                if id(p) not in name_of:
                    raise CaptureError(
                        f"optimizer param group {i} holds a tensor of shape {list(p.shape)} "
                        "that is not a parameter of the model")
            groups.append([name_of[id(p)] for p in g["params"]])
        in_opt = {n for g in groups for n in g}
        trainable = [n for n, p in named.items() if p.requires_grad and n in in_opt]
        reached = _reached_by_grad(spec, {n: named[n] for n in trainable})
        self.params = {n: named[n] for n in trainable if n in reached}
        self.unreached = [n for n in trainable if n not in reached]
        self.frozen = {n: p for n, p in named.items() if n not in self.params}
        self.opt = functional_optimizer(spec, groups, set(self.params), named)
        self.pnames = list(self.params)
        self.opt_state = self.opt.state_from_torch(spec.optimizer, named)
        self.clip = _clip_options(spec)

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

    def call_model(self, params, frozen, buffers, inputs):
        """functional_call with every state_dict name bound (tied weights
        bind each alias to its one tensor, so gradients of both uses sum)."""
        st = {**params, **frozen, **buffers}
        st.update({a: st[t] for a, t in self.aliases.items()})
        return functional_call(self.model, st, self.example.args(inputs))

    def loss(self, out, targets):
        """loss_fn on the target leaves, in the structure the spec gave them."""
        return self.spec.loss_fn(out, self.example.target(targets))

    def loss_and_grads(self, params, frozen, buffers, seed, offset, inputs, targets):
        """(loss, grads, new buffers) of one batch."""
        def loss_of(ps):
            # Buffers are cloned so in-place updates (BatchNorm running
            # stats) become new values we can return.
            bufs = {n: b.clone() for n, b in buffers.items()}
            out = self.call_model(ps, frozen, bufs, inputs)
            return self.loss(out, targets), bufs

        with rng.stream(seed, offset):
            grads, (loss, new_bufs) = grad_and_value(loss_of, has_aux=True)(params)
        return loss, grads, new_bufs

    def apply(self, params, grads, ostate, lr):
        """Clipping (if asked) and the optimizer update."""
        if self.clip is not None:
            grads = clip_grad_norm(grads, *self.clip)
        return self.opt.update(params, grads, ostate, lr)


def functional_optimizer(spec, groups, updated, named):
    """The spec's optimizer as a pure update: traced from its own step()
    (traced_optim.py), or, for torch's six classic optimizers under torch
    1.13 (whose step() reads .item()) or when
    `TrainSpec.optimizer_capture == "rules"`, the rewritten rule of
    optim.py (docs/optimizers.md)."""
    how = getattr(spec, "optimizer_capture", "auto")
    if how not in ("auto", "traced", "rules"):
        raise CaptureError(f"optimizer_capture={how!r}: must be 'auto', 'traced' or 'rules'")
    rule = ts_optim.SUPPORTED.get(type(spec.optimizer).__name__)
    is_torch = type(spec.optimizer).__module__.startswith("torch.optim")
    traceable = hasattr(torch, "compiler")  # torch 2.x: torch.optim traces
    # torch's capturable path, which the trace takes, computes bias
    # corrections from a float32 step tensor; eager uses Python floats. With
    # float64 parameters that is ~1e-5 off, so the six keep their rules.
    f64 = any(p.dtype == torch.float64 for p in named.values())
    if how == "rules" or (how == "auto" and rule is not None and is_torch
                          and (not traceable or f64)):
        return ts_optim.Optimizer(spec.optimizer, groups, updated=updated)
    refused = {"LBFGS": "its step(closure) re-evaluates the model up to max_iter times with "
               "data-dependent exits, and the captured step has no loops",
               "SparseAdam": "it takes sparse gradients, which the runtime does not have"}
    if is_torch and type(spec.optimizer).__name__ in refused:
        raise ts_optim.UnsupportedOptimizer(
            f"optimizer {type(spec.optimizer).__name__} is not supported: "
            f"{refused[type(spec.optimizer).__name__]}")
    if is_torch and not traceable:
        raise ts_optim.UnsupportedOptimizer(
            f"optimizer {type(spec.optimizer).__name__}: torch {torch.__version__}'s own "
            "optimizers read their step counts with .item(), so trainstep traces them only "
            "under torch 2.x; under this torch it has rules for "
            + ", ".join(sorted(ts_optim.SUPPORTED)) + " (user-written optimizers trace "
            "under both)")
    return traced_optim.TracedOptimizer(spec.optimizer, groups, updated, named)


def _aliases(model):
    """state_dict names that are a second name of a parameter or buffer."""
    first = {}
    for n, t in list(model.named_parameters()) + list(model.named_buffers()):
        first.setdefault(id(t), n)
    return {n: first[id(t)] for n, t in model.state_dict(keep_vars=True).items()
            if id(t) in first and first[id(t)] != n}


def _reached_by_grad(spec, params):
    """Names of `params` that get a gradient from the loss (torch leaves
    .grad None for the others): one eager forward/backward on a copy."""
    if not params:
        return set()
    model = copy.deepcopy(spec.model)
    model.train()
    named = dict(model.named_parameters())
    ps = [named[n] for n in params]
    ex = batch.example(spec)
    with rng.stream(torch.tensor(0), torch.tensor(0)):
        out = model(*ex.args([x.clone() for x in ex.input_leaves]))
        loss = spec.loss_fn(out, ex.target(ex.target_leaves))
    if not loss.requires_grad:
        return set()
    grads = torch.autograd.grad(loss, ps, allow_unused=True)
    return {n for n, g in zip(params, grads) if g is not None}


def _clip_options(spec):
    if spec.clip_grad_norm is None:
        return None
    max_norm, norm_type = float(spec.clip_grad_norm), float(spec.clip_grad_norm_type)
    if not max_norm > 0:
        raise CaptureError(f"clip_grad_norm={spec.clip_grad_norm!r}: must be a positive number")
    if not norm_type > 0:  # NaN and -inf too
        raise CaptureError(f"clip_grad_norm_type={spec.clip_grad_norm_type!r}: must be > 0 or inf")
    return max_norm, norm_type


def clip_grad_norm(grads, max_norm, norm_type):
    """torch.nn.utils.clip_grad_norm_ (1.13) as a pure function: the norm of
    the per-tensor norms, coefficient max_norm / (total + 1e-6) clamped at 1."""
    gs = list(grads.values())
    if not gs:
        return grads
    if math.isinf(norm_type):
        norms = [g.abs().amax() for g in gs]
        total = norms[0]
        for t in norms[1:]:
            total = torch.maximum(total, t)
    elif norm_type == 2.0:
        norms = [(g * g).sum().sqrt() for g in gs]
        total = functools.reduce(torch.add, [t * t for t in norms]).sqrt()
    else:
        norms = [g.abs().pow(norm_type).sum().pow(1.0 / norm_type) for g in gs]
        total = functools.reduce(torch.add, [t.pow(norm_type) for t in norms])
        total = total.pow(1.0 / norm_type)
    coef = max_norm / (total + 1e-6)
    coef = torch.minimum(coef, torch.ones_like(coef))  # clamp(max=1)
    return {n: g * coef for n, g in grads.items()}


def lr_dtype(params, opt=None):
    """The lr input's dtype: float64 when a trained parameter is float64 (a
    float32 LR would round the update that torch makes with a Python
    float) or the optimizer is traced (its step() computes with the LR as
    a Python float), else float32. A 0-d tensor, so it does not promote
    float32 parameters."""
    if getattr(opt, "lr_dtype", None) == torch.float64 or \
            any(t.dtype == torch.float64 for t in params.values()):
        return torch.float64
    return torch.float32


def capture_train(parts):
    """train_step: one whole step, loss and every new state tensor."""
    p = parts
    st = {**p.params, **p.frozen, **p.buffers, **p.opt_state}
    ins = (StepInputs().state("params", p.pnames, "param", st)
           .state("frozen", p.frozen, "frozen", st).state("buffers", p.buffers, "buffer", st)
           .state("opt", p.opt_state, "optim", st).lr(p.opt.base_lr, lr_dtype(p.params, p.opt)).rng()
           .batch(p.example, p.inputs, p.targets, p.layout))
    outs = (StepOutputs().loss().state("params", p.pnames).state("buffers", p.buffers)
            .state("opt", p.opt_state))

    def step(*flat):
        a = ins.unpack(flat)
        loss, grads, new_bufs = p.loss_and_grads(a.params, a.frozen, a.buffers, a.rng_seed,
                                                 a.rng_offset, a.inputs, a.targets)
        new_p, new_s = p.apply(a.params, grads, a.opt, a.lr)
        return outs.pack(loss=loss, params=new_p, buffers=new_bufs, opt=new_s)

    with _mode(p.model, True), provenance.recording(p.model):
        gm = _trace(step, ins.example)
    _check_traced_optimizer(p, gm)
    return Captured(gm, Signature(ins.ports, outs.ports), ins.example)


def _check_traced_optimizer(parts, gm):
    """A traced step() that read the LR or a step count as a plain float
    left a NaN number in the graph (scalars.py)."""
    if not getattr(parts.opt, "traced", False):
        return
    n = scalars.leaked_nan(gm)
    if n is not None:
        raise CaptureError(
            f"optimizer {parts.opt.name} ({parts.opt.source}): its step() turned the learning "
            f"rate or a step count into a plain Python float where trainstep could not keep "
            f"it traced (node {n.name}, {n.target}), e.g. through a function imported by name "
            "(`from math import sqrt`); use math.sqrt(...) or torch ops on it")


def capture_grad(parts):
    """grad_step: loss, gradients and new buffers of one batch; no update
    (gradient accumulation, gradients by name)."""
    p = parts
    st = {**p.params, **p.frozen, **p.buffers}
    ins = (StepInputs().state("params", p.pnames, "param", st)
           .state("frozen", p.frozen, "frozen", st).state("buffers", p.buffers, "buffer", st)
           .rng().batch(p.example, p.inputs, p.targets, p.layout))
    outs = StepOutputs().loss().state("buffers", p.buffers).grads("grads", p.pnames)

    def step(*flat):
        a = ins.unpack(flat)
        loss, grads, new_bufs = p.loss_and_grads(a.params, a.frozen, a.buffers, a.rng_seed,
                                                 a.rng_offset, a.inputs, a.targets)
        return outs.pack(loss=loss, buffers=new_bufs, grads=grads)

    with _mode(p.model, True):
        gm = _trace(step, ins.example)
    return Captured(gm, Signature(ins.ports, outs.ports), ins.example)


def capture_apply(parts):
    """apply_step: the optimizer update (after clipping) from given gradients."""
    p = parts
    st = {**p.params, **p.opt_state}
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(st[n].shape, generator=g, dtype=st[n].dtype) for n in p.pnames]
    ins = (StepInputs().state("params", p.pnames, "param", st)
           .state("opt", p.opt_state, "optim", st).lr(p.opt.base_lr, lr_dtype(p.params, p.opt))
           .grads(p.pnames, st, grads))
    outs = StepOutputs().state("params", p.pnames).state("opt", p.opt_state)

    def step(*flat):
        a = ins.unpack(flat)
        new_p, new_s = p.apply(a.params, a.grads, a.opt, a.lr)
        return outs.pack(params=new_p, opt=new_s)

    gm = _trace(step, ins.example)
    _check_traced_optimizer(p, gm)
    return Captured(gm, Signature(ins.ports, outs.ports), ins.example)


def capture_eval(parts):
    """eval_step: model.eval() outputs and the per-sample loss (so the C++
    side can mask a padded last batch), or, where an output has no batch
    dim (a loss the model returns), the batch's loss."""
    p = parts
    st = {**p.params, **p.frozen, **p.buffers}
    ins = (StepInputs().state("params", p.pnames, "param", st)
           .state("frozen", p.frozen, "frozen", st).state("buffers", p.buffers, "buffer", st)
           .rng().batch(p.example, p.inputs, p.targets, p.layout))

    seen = {}  # the output's Structure, found while tracing

    n_t = len(p.targets)

    def per_sample_loss(*args):  # the target leaves, then the output leaves
        ts, leaves = args[:n_t], args[n_t:]
        one = seen["structure"].build([o.unsqueeze(d) for o, d in zip(leaves, seen["dims"])])
        return p.loss(one, [t.unsqueeze(d) for t, d in zip(ts, p.layout.targets)])

    def step(*flat):
        a = ins.unpack(flat)
        # A model that samples in eval mode (a VAE's reparameterisation)
        # draws from the eval stream; most draw nothing, and lose the ports.
        with rng.stream(a.rng_seed, a.rng_offset, key_base=rng.EVAL_KEY_BASE):
            out = p.call_model(a.params, a.frozen, a.buffers, a.inputs)
        sf = getattr(p.spec, "step_function", None)
        if sf is not None:  # a train_step function (step_fn.py): its loss or eval_fn's
            with rng.stream(a.rng_seed, a.rng_offset, key_base=rng.EVAL_KEY_BASE):
                loss, leaves, seen["structure"], seen["dims"] = sf.evaluate(
                    out, p.example.target(a.targets), p.layout)
            return (*leaves, loss)
        try:
            leaves, seen["structure"] = pytree.flatten(out)
        except TypeError as e:
            raise CaptureError(f"the model's eval output: {e}") from None
        if not leaves:
            raise CaptureError("the model's eval output holds no tensor")
        seen["dims"] = batch.per_sample_dims(leaves, p.layout, seen["structure"].names)
        if seen["dims"] is None:  # the batch's loss: the model returns it
            return (*leaves, p.loss(out, a.targets).reshape(()))
        losses = vmap(per_sample_loss, in_dims=(*p.layout.targets, *seen["dims"]))(
            *a.targets, *leaves)
        return (*leaves, losses)

    with _mode(p.model, False), provenance.recording(p.model):
        gm = _trace(step, ins.example)
    ins.drop_unused(gm, {"rng_seed", "rng_offset"})
    sig_out = [dict(role="output", index=i, name=name)
               for i, name in enumerate(seen["structure"].names)]
    sig_out.append(dict(role="sample_loss" if seen["dims"] is not None else "batch_loss"))
    return Captured(gm, Signature(ins.ports, sig_out), ins.example)


@contextlib.contextmanager
def _mode(model, training):
    """The model in train or eval mode, RNNs reading swapped-in weights,
    attention modules on their plain path."""
    was = model.training
    model.train(training)
    try:
        with rnn.fresh_weights(model), patches.fast_paths_off(model):
            yield
    finally:
        model.train(was)


@capture_errors.translated
def _trace(fn, example):
    # Real-mode tracing executes the step: trace on clones so the user's
    # tensors are untouched.
    clones = [t.detach().clone() for t in example]
    # oneDNN's RNN path (2.x's CPU LSTM in training: mkldnn_rnn_layer) has
    # no runtime kernel; with it off, ATen runs the cells as plain ops.
    # The tracing environment (environment.py), one set of patches: the
    # library stand-ins (patches.py), libraries that ask whether they are
    # traced (torch.compiler.is_compiling()) hear yes, and math keeps an
    # optimizer's traced numbers traced.
    env = scalars.environment_patches(patches.stand_ins(environment.Patches()))
    with env.applied(), mkldnn_off():
        gm = make_fx(functionalize(fn), decomposition_table=decomposition_table())(*clones)
    if _mutating_nodes(gm):
        # Some C++ composites (2.x's no-grad GRU cell: mul_, add_, tanh_)
        # reach make_fx below functionalize; a second pass over the traced
        # aten graph functionalizes what they left.
        gm = make_fx(functionalize(gm))(*[t.detach().clone() for t in example])
    _clean(gm)
    views.densify(gm, example)
    return gm


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


def _mutating_nodes(gm):
    return [n for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
            and n.target._schema.is_mutable]


def _clean(gm):
    capture_errors.check_graph(gm)  # before dead code goes
    g = gm.graph
    _constants(gm)
    for prefix in _PROFILER:  # each exit, then the enter it used
        for n in [n for n in g.nodes if str(n.target).startswith(prefix) and not n.users]:
            g.erase_node(n)
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
        elif name == "aten.full_like.default" and _is_empty_permuted(n.args[0]):
            _full_of_size(g, n, n.args[0], n.args[1])
        elif name == "aten.copy.default":
            _copy_to_value(g, n)
        elif name in _BOOL_LOGIC and _meta(n)[1] == torch.bool:
            _bool_logic(g, n, name)
    _unclone_outputs(g)
    g.eliminate_dead_code()
    for n in _mutating_nodes(gm):
        raise CaptureError(f"in-place op {n.target} left in the graph after functionalize")
    gm.recompile()



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


# 2.x writes logic on bool masks as bitwise ops; on bool they are the
# runtime's mul (and), add (or), ne (xor) and eq False (not).
_BOOL_LOGIC = {"aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor",
               "aten.bitwise_not.default", "aten.logical_not.default",
               "aten.logical_and.default", "aten.logical_or.default", "aten.logical_xor.default"}


def _bool_logic(g, n, name):
    aten = torch.ops.aten
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
