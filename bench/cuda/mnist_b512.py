"""The MNIST CNN spec (examples/mnist) at batch 512, for the GPU benchmark."""
import importlib.util
import os
import sys

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "mnist",
                     "spec.py")
_spec = importlib.util.spec_from_file_location("mnist_spec", _path)
_mod = importlib.util.module_from_spec(_spec)
sys.modules["mnist_spec"] = _mod  # torch.compile re-imports what the step refers to
_spec.loader.exec_module(_mod)


def build(batch_size=512, seed=1):
    return _mod.build(batch_size=batch_size, seed=seed)
