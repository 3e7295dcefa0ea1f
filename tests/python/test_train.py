"""Training from C++: checkpoints load in PyTorch and give the same
accuracy there, and a resumed run is bit-identical to an uninterrupted one."""
import os
import re
import sys

import torch

from conftest import FASHION, ROOT, read_idx, run

sys.path.insert(0, os.path.join(ROOT, "examples", "mnist"))


def _accuracy_line(out):
    m = re.search(r"accuracy ([0-9.]+)% \((\d+)/(\d+)\)", out)
    assert m, out
    return int(m.group(2)), int(m.group(3))


def test_checkpoint_loads_in_pytorch_with_the_same_accuracy(mnist_adadelta, small_data, tmp_path):
    ckpt = tmp_path / "m.ckpt"
    run("train", mnist_adadelta, "--data", f"idx:{small_data}", "--epochs", 1, "--save", ckpt)
    # C++ eval on the full Fashion-MNIST test set (last batch padded + masked).
    correct_cpp, n = _accuracy_line(run("eval", mnist_adadelta, "--checkpoint", ckpt).stdout)
    assert n == 10000

    import spec as mnist
    from trainstep import checkpoint
    model = mnist.Net()
    model.load_state_dict(checkpoint.load_state_dict(str(ckpt)))
    model.eval()
    x = torch.from_numpy(read_idx(f"{FASHION}/t10k-images-idx3-ubyte.gz").copy()).float()
    y = torch.from_numpy(read_idx(f"{FASHION}/t10k-labels-idx1-ubyte.gz").copy()).long()
    x = ((x / 255.0 - 0.1307) / 0.3081).unsqueeze(1)
    with torch.no_grad():
        pred = torch.cat([model(x[i:i + 1000]).argmax(1) for i in range(0, 10000, 1000)])
    correct_torch = int((pred == y).sum())
    # Same weights; only summation order differs (oneDNN vs PyTorch), which
    # can flip a near-tie argmax: allow 2 of 10,000.
    assert abs(correct_cpp - correct_torch) <= 2, (correct_cpp, correct_torch)


def test_resume_is_bit_identical(mnist_adadelta, small_data, tmp_path):
    data = f"idx:{small_data}"
    common = ["--data", data, "--threads", 1, "--lr-schedule", "step:1:0.7"]
    straight, first, resumed = (tmp_path / n for n in ("a.ckpt", "b.ckpt", "c.ckpt"))
    run("train", mnist_adadelta, *common, "--epochs", 2, "--save", straight)
    run("train", mnist_adadelta, *common, "--epochs", 1, "--save", first)
    out = run("train", mnist_adadelta, *common, "--epochs", 1, "--resume", first,
              "--save", resumed).stdout
    assert "epoch 2: lr 0.7" in out  # the schedule continued, not restarted

    from trainstep import checkpoint
    a_model, a_opt, a_meta = checkpoint.load(str(straight))
    c_model, c_opt, c_meta = checkpoint.load(str(resumed))
    assert a_meta["step"] == c_meta["step"] == "20"  # 640 samples / 64 per batch * 2 epochs
    for k in {**a_model, **a_opt}:
        a = {**a_model, **a_opt}[k]
        c = {**c_model, **c_opt}[k]
        assert torch.equal(a, c), k
    # And training actually changed the weights.
    first_model, _, _ = checkpoint.load(str(first))
    assert not torch.equal(first_model["fc1.weight"], a_model["fc1.weight"])
