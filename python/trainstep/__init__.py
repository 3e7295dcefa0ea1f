"""trainstep: capture a whole PyTorch training step and run it from C++.

The Python side is only the capture layer: a spec file's build() returns a
TrainSpec, and `trainstep export` turns it into a .tstep artifact.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

# The one version of trainstep, binary and exporter alike: CMakeLists.txt
# compiles it into the binary and python/_build_backend reads it for the
# package, both from this line. The two refuse to work together unless
# they are equal (trainstep/versions.py). FORMAT_VERSION, the artifact
# format's, is src/ir/program.h's kFormatVersion.
__version__ = "0.2.0"
FORMAT_VERSION = 1


@dataclass
class TrainSpec:
    """What a spec file's build() returns.

    model(*example_inputs) runs the model; loss_fn(output, example_target)
    returns a 0-d loss; optimizer is a torch.optim instance built on
    model.parameters(). The example batch fixes the batch size. Each input
    and the target may be a tensor or a structure of them (dict, tuple,
    namedtuple, dataclass): a dict of labels and boxes is several target
    tensors, one runtime port each.
    """
    model: Any
    loss_fn: Callable
    optimizer: Any
    example_inputs: Sequence[Any]
    example_target: Any
    name: Optional[str] = None
    # Steps of eager PyTorch recorded as the golden trace for `verify`.
    golden_steps: int = 3
    # Clip gradients by their global norm before the update, as
    # torch.nn.utils.clip_grad_norm_(optimizer's parameters, max_norm, norm_type).
    clip_grad_norm: Optional[float] = None
    clip_grad_norm_type: float = 2.0
    # Also export grad_step and apply_step traced, with step 0's eager
    # gradients for verify (without, the runtime cuts them from train_step
    # where a run needs them); `trainstep export --grads` sets it.
    export_grads: bool = False
    # The dim of each example input tensor (an int: of all; a structured
    # input counts each tensor leaf, in order) and of each target tensor
    # (an int: of all; a sequence: one per target leaf) that holds the
    # batch; None: dim 0, or where the example batch shows it
    # (sequence-first data: dim 1). See trainstep/batch.py.
    batch_dims: Optional[Any] = None
    target_batch_dim: Optional[Any] = None
    # How the optimizer becomes part of the step: "auto" traces its own
    # step(), except under torch 1.13, where torch's SGD, Adadelta, Adam,
    # AdamW, RMSprop and Adagrad take trainstep's rewritten rules; "traced"
    # always traces; "rules" takes the rules (docs/optimizers.md).
    optimizer_capture: str = "auto"
    # torch.bfloat16: the forward and the loss run under
    # torch.autocast("cpu", dtype=torch.bfloat16), in the compiled step as
    # in eager; parameters and optimizer state stay float32 (docs/bf16.md).
    autocast: Optional[Any] = None
    extra: dict = field(default_factory=dict)


def export(train_step, example_batch, path, *, model=None, optimizer=None, target=None,
           eval_fn=None, name=None, golden_steps=3, grads=False, calibration_rounds=2):
    """Captures `train_step(batch)`, a training step written as in eager
    PyTorch (forward, loss, loss.backward(), optionally clip_grad_norm_,
    optimizer.step(), optimizer.zero_grad(); returns the loss), into the
    artifact at `path`; returns its program JSON. example_batch is
    (inputs, target) as a DataLoader yields it, or a dict whose target
    key(s) `target` names (default: labels, label, targets, target or y).
    model and optimizer default to the one nn.Module and the one
    torch.optim.Optimizer the function reaches by name. The eval step runs
    eval_fn(batch) if given (it returns the loss, 0-d or one per sample,
    alone or first in a tuple, or under "loss" in a dict), else
    train_step's forward and loss. See step_fn.py."""
    from . import exporter, step_fn
    spec = step_fn.spec_from(train_step, example_batch, model, optimizer, target, name,
                             golden_steps, grads, eval_fn)
    try:
        return exporter.export_spec(spec, path, calibration_rounds=calibration_rounds)
    finally:
        step_fn.restore(spec)

