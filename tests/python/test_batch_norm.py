"""BatchNorm end to end. The running stats and num_batches_tracked must
update exactly as eager training mode does (momentum 0.1, 0.3 and None =
cumulative average; BatchNorm1d and 2d; affine and not), eval mode must
use them, and a checkpoint trained in C++ must evaluate the same in
PyTorch's eval mode.

tests/python/specs/bn_cnn.py uses smooth activations, so eager PyTorch is
reproducible to 2e-6 of each tensor's scale under 1e-7 parameter noise
(scripts/eager_spread.py) and the parity check can be tight:
1e-5. Measured C++ vs eager: 1.1e-6 (momentum buffers), running stats 5e-7,
eval output 6e-7."""
import os

import pytest
import torch

from conftest import ROOT, SPECS, held_out_images, run, train_and_eval

BN_CNN = os.path.join(SPECS, "bn_cnn.py")


@pytest.fixture(scope="module")
def bn_cnn(artifacts):
    return artifacts("bn_cnn", BN_CNN)


@pytest.mark.parametrize("flags", [("--threads", "1"), ("--threads", "2"), ("--no-fusion",)],
                         ids=["threads1", "threads2", "no-fusion"])
def test_matches_eager_5_steps_buffers_and_eval(bn_cnn, flags):
    p = run("verify", bn_cnn, "--tol", "1e-5", *flags, check=False)
    out = p.stdout
    assert out.strip().splitlines()[-1] == "verify: ok", out + p.stderr
    for bn in ("bn1", "bn2", "bn3", "bn4"):  # every buffer was compared
        for buf in ("running_mean", "running_var", "num_batches_tracked"):
            assert f"state {bn}.{buf} " in out, out
    for line in out.splitlines():
        if "num_batches_tracked" in line:  # an int64 count: exact
            assert "max_abs 0.000e+00" in line, line
    assert "eval output" in out and "eval sample_loss" in out


def test_a_wrong_running_var_is_caught(bn_cnn, tmp_path):
    """The check can fail: the cumulative average (momentum=None) off by
    1e-4 of its value."""
    from trainstep import safetensors_io
    tensors, meta = safetensors_io.load(bn_cnn)
    tensors["golden/final/bn2.running_var"] = tensors["golden/final/bn2.running_var"] * (1 + 1e-4)
    bad = str(tmp_path / "bad.tstep")
    safetensors_io.save(bad, tensors, meta)
    p = run("verify", bad, "--tol", "1e-5", check=False)
    assert p.returncode == 3  # a verify mismatch (tools/exit_codes.h)
    assert p.stdout.strip().splitlines()[-1] == "verify: FAILED state bn2.running_var"


def test_checkpoint_evaluates_the_same_in_pytorch_eval_mode(artifacts, small_data, tmp_path):
    """The ResNet trained one epoch from C++ (its BatchNorm buffers updated
    by the C++ step), then evaluated on the 300 held-out images by
    `trainstep eval` and by PyTorch in eval mode from the checkpoint."""
    art = artifacts("resnet", os.path.join(ROOT, "examples", "resnet", "spec.py"))
    ckpt = tmp_path / "r.ckpt"
    loss_cpp, correct_cpp, n = train_and_eval(art, small_data, ckpt)

    import importlib.util  # under its own name: other tests import the MNIST spec as `spec`
    ms = importlib.util.spec_from_file_location("resnet_spec",
                                                os.path.join(ROOT, "examples", "resnet", "spec.py"))
    resnet = importlib.util.module_from_spec(ms)
    ms.loader.exec_module(resnet)
    from trainstep import checkpoint
    state = checkpoint.load_state_dict(str(ckpt))
    assert int(state["layer1.bn1.num_batches_tracked"]) == 640 // 128
    model = resnet.ResNet()
    model.load_state_dict(state)
    model.eval()
    x, y = held_out_images(small_data)
    with torch.no_grad():
        logits = model(x)
    loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(logits, y).item()
    correct = int((logits.argmax(1) == y).sum())
    assert n == y.shape[0] == 300
    # Same weights and running stats; oneDNN vs PyTorch summation order only.
    assert abs(loss - loss_cpp) <= 1e-4, (loss, loss_cpp)  # eval prints 4 decimals
    assert abs(correct - correct_cpp) <= 1, (correct, correct_cpp)
