"""Capture the whole training step (and an eval step) as functional FX graphs.

Recipe (docs/ARCHITECTURE.md, "Capture"): one Python function takes every
piece of state as an explicit tensor argument, runs the model through
functional_call inside grad_and_value, applies the optimizer (its own
step() traced, traced_optim.py, or optim.py's rules), and returns the loss plus every new state tensor. make_fx(functionalize(…))
with ATen decompositions traces it to a graph with no mutation.

The pipeline, one stage per file, in order (exporter.py drives it; this
file builds the step functions it traces):

1. environment.py     the patches and tracer flags the trace runs under,
                      applied by one context manager (the stand-ins are
                      patches.py's, math on traced numbers scalars.py's)
2. trace.py           make_fx(functionalize(step)) under the environment;
                      capture_errors.py turns torch's errors into the user's
3. decompositions.py  the ATen ops make_fx lowers, and into what (indexing
                      ops: index_decompositions.py)
4. rewrites.py        the graph cleaned into the runtime's ops: a table from
                      op to rewrite, applied in one loop
5. checks.py          what the step cannot do: check_spec before capture,
                      check_graph before the rewrites, check_functional after
6. serialize.py       the graph as the artifact's function JSON
"""
import contextlib
import copy
import functools
import math
from dataclasses import dataclass

import torch

from . import capture_errors
from . import optim as ts_optim
from . import batch, caches, checks, patches, provenance, pytree, rng, rnn
from . import traced_optim
from .signature import StepInputs, StepOutputs, tensor_meta
from .compat import functional_call, grad_and_value, vmap
from .trace import trace


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
        check_dtypes(named, self.buffers)
        autocast_dtype(spec)
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

    def autocast(self):
        """The spec's autocast around a forward and its loss (a no-op
        without one): the traced step records autocast's casts."""
        return autocast_context(self.spec)

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
            with self.autocast():
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


def autocast_dtype(spec):
    """TrainSpec.autocast, checked: None or torch.bfloat16."""
    dt = getattr(spec, "autocast", None)
    if dt is None:
        return None
    if dt is True:
        return torch.bfloat16
    if dt != torch.bfloat16:
        raise CaptureError(f"autocast={dt!r}: trainstep autocasts to torch.bfloat16 only "
                           "(float16 has no kernels here; docs/bf16.md)")
    return dt


def autocast_context(spec):
    dt = autocast_dtype(spec)
    if dt is None:
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=dt)


def eval_outputs(spec, leaves):
    """Model outputs as the eval step returns them: under autocast a
    bfloat16 output is returned as float32 (exact), so the runtime's ports
    and accuracy readers stay float32."""
    if autocast_dtype(spec) is None:
        return list(leaves)
    return [o.float() if o.dtype == torch.bfloat16 else o for o in leaves]


def check_dtypes(named, buffers):
    """A model moved wholly to bfloat16 is refused here, in one line: the
    runtime keeps parameters and optimizer state in float32."""
    for what, ts in (("parameter", named), ("buffer", buffers)):
        for n, t in ts.items():
            if t.dtype == torch.bfloat16:
                raise CaptureError(
                    f"{what} '{n}' is bfloat16: trainstep trains bfloat16 under autocast with "
                    "float32 parameters (keep the model float32 and set "
                    "TrainSpec(autocast=torch.bfloat16), or use torch.autocast in your step; "
                    "docs/bf16.md)")


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
    # The gradients are results of the trace too, so the artifact can name
    # them (serialize.grads_apart): the runtime splits train_step there for
    # data-parallel training and accumulation.
    outs = (StepOutputs().loss().state("params", p.pnames).state("buffers", p.buffers)
            .state("opt", p.opt_state).grads("grads", p.pnames))

    def step(*flat):
        a = ins.unpack(flat)
        loss, grads, new_bufs = p.loss_and_grads(a.params, a.frozen, a.buffers, a.rng_seed,
                                                 a.rng_offset, a.inputs, a.targets)
        # The update gets copies: an optimizer that works on p.grad in place
        # (MuonBf16's lerp_) must not turn the named gradients into its own
        # values. Unmutated, each copy is its gradient (compose_views drops it).
        new_p, new_s = p.apply(a.params, {n: g.clone() for n, g in grads.items()}, a.opt, a.lr)
        return outs.pack(loss=loss, params=new_p, buffers=new_bufs, opt=new_s, grads=grads)

    with _mode(p.model, True), provenance.recording(p.model):
        gm = trace(step, ins.example)
    checks.check_traced_optimizer(p, gm)
    return Captured(gm, Signature(ins.ports, outs.ports), ins.example)


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
        gm = trace(step, ins.example)
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

    gm = trace(step, ins.example)
    checks.check_traced_optimizer(p, gm)
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
        with rng.stream(a.rng_seed, a.rng_offset, key_base=rng.EVAL_KEY_BASE), p.autocast():
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
            with p.autocast():
                return (*eval_outputs(p.spec, leaves), p.loss(out, a.targets).reshape(()))
        # Under autocast the per-sample losses take the float32 outputs: vmap
        # batches the loss above autocast, which would leave it bfloat16.
        leaves = eval_outputs(p.spec, leaves)
        with p.autocast():
            losses = vmap(per_sample_loss, in_dims=(*p.layout.targets, *seen["dims"]))(
                *a.targets, *leaves)
        return (*leaves, losses)

    with _mode(p.model, False), provenance.recording(p.model):
        gm = trace(step, ins.example)
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
