"""Read trainstep checkpoints from PyTorch.

A checkpoint is a safetensors file: model parameters and buffers under their
state_dict names, optimizer state under "optim/…", and metadata (step, seed,
lr, epoch, …). So `model.load_state_dict(trainstep.checkpoint.load_state_dict(p))`
continues in PyTorch where the C++ run stopped.
"""
from . import safetensors_io

FORMAT = "trainstep-checkpoint"


def load(path):
    """(model_state_dict, optimizer_state, metadata) of a checkpoint. Its
    checksums are checked first (ValueError naming the corrupt tensor); a
    checkpoint from before checksums loads with a warning."""
    tensors, meta = safetensors_io.load(path)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a trainstep checkpoint")
    safetensors_io.warn_if_unchecked(path, meta)
    model = {k: v for k, v in tensors.items() if not k.startswith("optim/")}
    optim = {k: v for k, v in tensors.items() if k.startswith("optim/")}
    return model, optim, meta


def load_state_dict(path):
    """The model's state_dict, ready for model.load_state_dict()."""
    return load(path)[0]
