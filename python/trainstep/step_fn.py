"""A training step as the user writes it: `trainstep.export(train_step,
example_batch, path)`.

    def train_step(batch):
        x, y = batch
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # optional
        optimizer.step()
        optimizer.zero_grad()
        return loss

The function becomes a TrainSpec whose "model" is the user's model with its
forward standing for the function, and whose loss runs the function: every
path of the capture (golden run, gradients, the traced step) then works as
for a spec file. Inside, the function runs *dry*: `backward()` records the
tensor it is called on (the loss) and computes nothing, `clip_grad_norm_`
records its options (the capture clips as torch does), and the optimizer's
`step()` and `zero_grad()` do nothing; the capture differentiates that loss
and applies the optimizer traced from its own step(). Whatever model object
the capture calls (the user's, or a copy for the eager golden run), the
user's model runs with that object's tensors, so the function's own
references to `model` see them.

The eval step runs the same function, dry, in eval mode: it reports the
batch's loss (and the function's other returned tensors). Or it runs the
user's `eval_fn(batch)`, which returns the loss (0-d: the batch's; [batch]:
each sample's, so a padded last batch is masked), alone or first in a tuple
with other outputs, or under "loss" in a dict.
"""
import contextlib
import copy
import types
from dataclasses import dataclass

import torch
from torch.nn.utils import stateless

from . import TrainSpec, environment
from .errors import CaptureError

_TARGET_KEYS = ("labels", "label", "targets", "target", "y")


@dataclass
class _Record:
    loss: torch.Tensor = None
    clip: tuple = None
    steps: int = 0
    backward_calls: int = 0


class _Pending:
    """What the model "returns": its inputs, the tensors it ran with and
    its modules' train/eval modes; the loss function completes the step."""

    def __init__(self, module, inputs):
        # Read as attributes: functional_call on torch 1.13 reparametrizes by
        # attribute lookup, leaving the state dict's own tensors in place.
        self.tensors = {n: _attr(module, n) for n in module.state_dict(keep_vars=True)}
        self.modes = [m.training for m in module.modules()]
        self.inputs = inputs


class StepFunction:
    """The user's step function with its model, optimizer and batch split."""

    def __init__(self, fn, model, optimizer, batch, target, eval_fn=None):
        self.fn, self.model, self.optimizer, self.eval_fn = fn, model, optimizer, eval_fn
        self.is_dict = isinstance(batch, dict)
        if self.is_dict:
            keys = [target] if isinstance(target, str) else list(target or [])
            keys = keys or [k for k in _TARGET_KEYS if k in batch][:1]
            if not keys or any(k not in batch for k in keys):
                raise CaptureError(
                    f"example_batch is a dict with keys {sorted(batch)}: name its target "
                    f"key(s) with target=... (looked for {', '.join(_TARGET_KEYS)})")
            self.target_keys = keys
            self.inputs = {k: v for k, v in batch.items() if k not in keys}
            self.target = {k: batch[k] for k in keys} if len(keys) > 1 else batch[keys[0]]
        elif isinstance(batch, (tuple, list)) and len(batch) == 2 and target is None:
            self.inputs, self.target = batch
        else:
            raise CaptureError("example_batch must be (inputs, target), as a DataLoader yields "
                               "it, or a dict whose target key(s) are named by target=...")

    def batch(self, inputs, target):
        """The batch in the function's own form."""
        if not self.is_dict:
            return (inputs, target)
        t = target if isinstance(target, dict) else {self.target_keys[0]: target}
        return {**inputs, **t}

    @contextlib.contextmanager
    def _dry(self, rec):
        """backward, clip_grad_norm_ and the optimizer's step/zero_grad record
        instead of acting."""
        def backward(t, *a, **k):
            rec.loss, rec.backward_calls = t, rec.backward_calls + 1

        def clip(parameters, max_norm, norm_type=2.0, *a, **k):
            rec.clip = (float(max_norm), float(norm_type))
            return torch.zeros(())

        def step(*a, **k):
            rec.steps += 1
        p = environment.Patches().add(torch.Tensor, "backward", backward)
        p.add(torch.nn.utils, "clip_grad_norm_", clip)
        p.add(self.optimizer, "step", step).add(self.optimizer, "zero_grad", lambda *a, **k: None)
        with p.applied():
            yield

    def run(self, pending, target):
        """(loss, returned): the function, dry, on the model's tensors in
        `pending`, with the user's own forward."""
        rec = _Record()
        returned = self._call(self.fn, pending, target, rec)
        if rec.loss is None:
            raise CaptureError(f"{_name(self.fn)} never calls loss.backward(): trainstep "
                               "differentiates the tensor it calls backward() on")
        if rec.backward_calls > 1:
            raise CaptureError(f"{_name(self.fn)} calls backward() {rec.backward_calls} times; "
                               "trainstep captures one loss per step")
        self.last = rec
        return rec.loss.reshape(()), returned

    def _call(self, fn, pending, target, rec):
        """fn(batch), dry, on the model's tensors in `pending`."""
        batch = self.batch(pending.inputs, target)
        own = self.model.__dict__.pop("forward")
        modules = list(self.model.modules())
        modes = [m.training for m in modules]
        for m, t in zip(modules, pending.modes):  # a copy's eval() is the model's
            m.training = t
        try:
            with stateless._reparametrize_module(self.model, pending.tensors), self._dry(rec):
                return fn(batch)
        finally:
            self.model.forward = own
            for m, t in zip(modules, modes):
                m.training = t

    def loss_fn(self, out, target):
        return self.run(out, target)[0]

    def evaluate(self, pending, target, layout):
        """(loss, output leaves, their Structure, their batch dims) for the
        eval step: the loss and the other tensors eval_fn (else the train
        function, dry) returns, or the loss where it returns no other
        tensor. dims is None where the loss is the batch's (0-d)."""
        from . import batch, pytree
        if self.eval_fn is None:
            loss, returned = self.run(pending, target)
        else:
            loss, returned = self._evaluated(pending, target, layout.size)
        leaves, structure = pytree.flatten(returned)
        if not leaves:
            leaves, structure = pytree.flatten(loss)
        if loss.dim() == 0:
            return loss, leaves, structure, None
        return loss, leaves, structure, batch.output_dims(leaves, layout, structure.names)

    def _evaluated(self, pending, target, size):
        """(loss, the other outputs) of eval_fn(batch)."""
        rec = _Record()
        returned = self._call(self.eval_fn, pending, target, rec)
        name = f"{_name(self.eval_fn)} (eval_fn)"
        if rec.backward_calls or rec.steps:
            raise CaptureError(f"{name} calls backward() or optimizer.step(); the eval step "
                               "only evaluates")
        rest = None
        if isinstance(returned, dict) and "loss" in returned:
            loss, rest = returned["loss"], {k: v for k, v in returned.items() if k != "loss"}
        elif isinstance(returned, (tuple, list)) and returned:
            loss, rest = returned[0], type(returned)(returned[1:]) \
                if not hasattr(returned, "_fields") else tuple(returned[1:])
        else:
            loss = returned
        if not isinstance(loss, torch.Tensor):
            raise CaptureError(f"{name} returns {type(returned).__name__}; return the loss (a "
                               "tensor), a tuple (loss, outputs...) or a dict with 'loss'")
        if loss.dim() > 1 or (loss.dim() == 1 and loss.shape[0] != size):
            raise CaptureError(f"{name}'s loss has shape {list(loss.shape)}; return the "
                               f"batch's (0-d) or one per sample ([{size}])")
        return loss, rest


def _attr(module, dotted):
    for part in dotted.split("."):
        module = getattr(module, part)
    return module


def _name(fn):
    return getattr(fn, "__qualname__", None) or repr(fn)


def _forward(self, *inputs):
    """The model's stand-in forward: the tensors this object runs with (a
    copy's, or the traced ones under functional_call), for the loss."""
    return _Pending(self, inputs[0] if len(inputs) == 1 else inputs)


def _found(fn, kind):
    """The one object of `kind` the function reaches by name."""
    seen = {}
    cells = zip(fn.__code__.co_freevars, [c.cell_contents for c in (fn.__closure__ or ())])
    for name, v in list(cells) + [(n, fn.__globals__.get(n)) for n in fn.__code__.co_names]:
        if isinstance(v, kind):
            seen[id(v)] = (name, v)
    return list(seen.values())


def spec_from(fn, batch, model=None, optimizer=None, target=None, name=None, golden_steps=3,
              grads=False, eval_fn=None):
    """A TrainSpec that captures `fn(batch)`, and `eval_fn(batch)` (if
    given) as the eval step."""
    for what, kind, given in (("model", torch.nn.Module, model),
                              ("optimizer", torch.optim.Optimizer, optimizer)):
        if given is None:
            found = _found(fn, kind)
            if len(found) != 1:
                names = ", ".join(n for n, _ in found) or "none"
                raise CaptureError(
                    f"{_name(fn)}: cannot tell its {what} (found by name: {names}); pass "
                    f"{what}=... to trainstep.export")
            if what == "model":
                model = found[0][1]
            else:
                optimizer = found[0][1]
    sf = StepFunction(fn, model, optimizer, batch, target, eval_fn)
    # One dry run on a copy: the function's loss, its clipping, and that it
    # steps the optimizer.
    probe = copy.deepcopy(model)
    rec = _Record()
    with sf._dry(rec), stateless._reparametrize_module(model, dict(probe.state_dict(
            keep_vars=True))):
        fn(sf.batch(sf.inputs, sf.target))
    if rec.loss is None:
        raise CaptureError(f"{_name(fn)} never calls loss.backward()")
    if rec.steps == 0:
        raise CaptureError(f"{_name(fn)} never calls optimizer.step() on the optimizer "
                           f"({type(optimizer).__name__}) it was exported with")
    model.forward = types.MethodType(_forward, model)
    spec = TrainSpec(model, sf.loss_fn, optimizer, (sf.inputs,), sf.target,
                     name=name or _name(fn), golden_steps=golden_steps, export_grads=grads)
    if rec.clip is not None:
        spec.clip_grad_norm, spec.clip_grad_norm_type = rec.clip
    spec.step_function = sf
    return spec


def restore(spec):
    """The user's model with its own forward again."""
    sf = getattr(spec, "step_function", None)
    if sf is not None:
        sf.model.__dict__.pop("forward", None)
