"""trainstep: capture a whole PyTorch training step and run it from C++.

The Python side is only the capture layer: a spec file's build() returns a
TrainSpec, and `trainstep export` turns it into a .tstep artifact.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

FORMAT_VERSION = 1


@dataclass
class TrainSpec:
    """What a spec file's build() returns.

    model(*example_inputs) runs the model; loss_fn(output, example_target)
    returns a 0-d loss; optimizer is a torch.optim instance built on
    model.parameters(). The example batch fixes the batch size.
    """
    model: Any
    loss_fn: Callable
    optimizer: Any
    example_inputs: Sequence[Any]
    example_target: Any
    name: Optional[str] = None
    # Steps of eager PyTorch recorded as the golden trace for `verify`.
    golden_steps: int = 3
    extra: dict = field(default_factory=dict)
