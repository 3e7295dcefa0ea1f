"""`--device cuda` from the command line, on any machine.

Without a GPU (CI's machines) a CUDA run is one clear line, never a crash;
a build without the CUDA backend says how to get it. In a build with the
backend, every op of every example's steps, as the compiler leaves them
for the GPU, has a CUDA kernel (`trainstep ops --device cuda`), so a missing kernel
shows here and not first on a GPU. With a GPU, the MNIST CNN verifies on it
(scripts/cuda-check.sh runs the whole GPU suite)."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, run
from test_errors import _one_line_error


def cuda_ops():
    return {line.split()[0] for line in run("ops", "--device", "cuda").stdout.splitlines() if line}


def has_gpu():
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def test_no_gpu_is_one_clear_line(mnist_adadelta):
    if has_gpu():
        pytest.skip("this machine has a GPU")
    p = run("verify", mnist_adadelta, "--device", "cuda", check=False)
    line = _one_line_error(p)
    assert ("no usable CUDA device" in line) or ("built without the CUDA backend" in line), line


def test_unknown_device_is_a_usage_error(mnist_adadelta):
    p = run("bench", mnist_adadelta, "--device", "tpu", check=False)
    assert p.returncode == 2, p.stderr
    assert "--device" in p.stderr


@pytest.mark.parametrize("model", ["mnist", "resnet", "transformer", "lstm", "mobilenet", "vae",
                                   "mlp_regression"])
def test_zoo_ops_have_cuda_kernels(request, artifacts, model):
    have = cuda_ops()
    if not have:
        pytest.skip("this build has no CUDA backend")
    # The session's shared artifacts, exported as test_models exports them
    # (the cache is keyed by name: the same name must mean the same export).
    shared = {"mnist": "mnist_adadelta", "transformer": "char_transformer", "lstm": "char_lstm"}
    art = (request.getfixturevalue(shared[model]) if model in shared
           else artifacts(model, os.path.join(ROOT, "examples", model, "spec.py")))
    for fn in ("train_step", "eval_step"):
        ir = run("inspect", art, "--ir", fn, "--device", "cuda").stdout
        used = set(re.findall(r"= ([a-z_]+\.[A-Za-z0-9_.]+)\(", ir))
        assert used, ir[:500]
        assert not used - have, f"{model} {fn}: no CUDA kernel for {sorted(used - have)}"


def test_mnist_verifies_on_the_gpu(mnist_adadelta):
    if not has_gpu() or not cuda_ops():
        pytest.skip("needs a GPU and a build with the CUDA backend")
    p = run("verify", mnist_adadelta, "--device", "cuda")
    assert "verify: ok" in p.stdout, p.stdout
