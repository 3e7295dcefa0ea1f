"""PyTorch state dicts <-> trainstep checkpoints (import-checkpoint,
export-checkpoint): a round trip keeps every tensor bit-identical, and 3
more steps in PyTorch and in trainstep from one checkpoint agree."""
import os

import pytest
import torch

from conftest import ROOT, SPECS, run
from test_features import eager_steps, repeated_sample_data

SPEC_FILES = {
    "interop_adamw": os.path.join(SPECS, "interop_adamw.py"),
    "mnist_sgd": os.path.join(SPECS, "mnist_sgd.py"),
    "mnist_rmsprop": os.path.join(SPECS, "mnist_rmsprop_centered.py"),
    "mnist_adadelta": os.path.join(ROOT, "examples", "mnist", "spec.py"),
}


def _spec(name):
    from trainstep.exporter import load_spec
    return load_spec(SPEC_FILES[name])


def _art(artifacts, name):
    return artifacts(name, SPEC_FILES[name], 5 if name == "mnist_adadelta" else None)


def _eager_train(spec, steps, seed=0):
    """A few eager steps on permuted example batches: optimizer state exists."""
    g = torch.Generator().manual_seed(seed)
    x, y = spec.example_inputs[0], spec.example_target
    for _ in range(steps):
        perm = torch.randperm(y.shape[0], generator=g)
        spec.optimizer.zero_grad()
        spec.loss_fn(spec.model(x[perm]), y[perm]).backward()
        spec.optimizer.step()


def _assert_same(a, b, where):
    """Equal structure; tensors bit-identical with the same dtype."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert set(a) == set(b), (where, set(a) ^ set(b))
        for k in a:
            _assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


@pytest.mark.parametrize("name", ["interop_adamw", "mnist_sgd", "mnist_rmsprop",
                                  "mnist_adadelta"])
def test_round_trip_is_bit_identical(artifacts, tmp_path, name):
    art = _art(artifacts, name)
    spec = _spec(name)
    _eager_train(spec, 2)
    src = tmp_path / "torch.pt"
    torch.save({"model": spec.model.state_dict(), "optimizer": spec.optimizer.state_dict()}, src)
    run("import-checkpoint", art, src, "--out", tmp_path / "ts.ckpt")
    run("export-checkpoint", art, tmp_path / "ts.ckpt", "--out", tmp_path / "back.pt")
    back = torch.load(tmp_path / "back.pt")
    _assert_same(spec.model.state_dict(), back["model"], "model")
    _assert_same(spec.optimizer.state_dict(), back["optimizer"], "optimizer")
    # And PyTorch takes it.
    fresh = _spec(name)
    fresh.model.load_state_dict(back["model"])
    fresh.optimizer.load_state_dict(back["optimizer"])


def test_three_more_steps_agree(artifacts, tmp_path):
    """2 eager steps -> checkpoint; then 3 steps in PyTorch and 3 in
    trainstep (dropout on, same masks), on a dataset whose batches are all
    one tensor whatever the shuffle."""
    art = _art(artifacts, "interop_adamw")
    spec = _spec("interop_adamw")
    _eager_train(spec, 2)
    src = tmp_path / "torch.pt"
    torch.save({"model": spec.model.state_dict(), "optimizer": spec.optimizer.state_dict()}, src)
    ckpt = tmp_path / "ts.ckpt"
    run("import-checkpoint", art, src, "--out", ckpt, "--seed", 7)
    x1, label = repeated_sample_data(str(tmp_path / "d"), 96)
    done = tmp_path / "done.ckpt"
    run("train", art, "--data", f"idx:{tmp_path / 'd'}", "--resume", ckpt, "--save", done,
        "--threads", 1)
    run("export-checkpoint", art, done, "--out", tmp_path / "done.pt")
    got = torch.load(tmp_path / "done.pt")

    x, y = x1.expand(32, 1, 28, 28).contiguous(), torch.full((32,), label)
    eager_steps(spec.model, spec.optimizer, x, y, seed=7, first_step=2, n=3)
    for n, p in spec.model.state_dict().items():
        torch.testing.assert_close(got["model"][n], p, rtol=1e-4, atol=1e-5, msg=n)
    want = spec.optimizer.state_dict()
    assert got["optimizer"]["param_groups"] == want["param_groups"]
    for i, st in want["state"].items():
        for k, v in st.items():
            torch.testing.assert_close(got["optimizer"]["state"][i][k], v, rtol=1e-4, atol=1e-6,
                                       msg=f"{i}/{k}")
    assert float(got["optimizer"]["state"][0]["step"]) == 5.0


def test_import_refuses_other_hyper_parameters(artifacts, tmp_path):
    art = _art(artifacts, "interop_adamw")
    spec = _spec("interop_adamw")
    spec.optimizer.param_groups[0]["weight_decay"] = 0.1
    src = tmp_path / "torch.pt"
    torch.save({"model": spec.model.state_dict(), "optimizer": spec.optimizer.state_dict()}, src)
    p = run("import-checkpoint", art, src, "--out", tmp_path / "x.ckpt", check=False)
    assert p.returncode == 1
    assert "param group 0: weight_decay=0.1, but the artifact was exported with " \
           "weight_decay=0.05" in p.stderr, p.stderr
    assert not (tmp_path / "x.ckpt").exists()


def test_import_refuses_another_model(artifacts, tmp_path):
    art = _art(artifacts, "interop_adamw")
    spec = _spec("mnist_sgd")
    src = tmp_path / "torch.pt"
    torch.save({"model": spec.model.state_dict()}, src)
    p = run("import-checkpoint", art, src, "--out", tmp_path / "x.ckpt", check=False)
    assert p.returncode == 1
    assert "the model state_dict has no 'fc1.weight'" in p.stderr or \
           "model 'fc1.weight' is float32[128, 9216]" in p.stderr, p.stderr


def test_model_only_import_starts_a_fresh_optimizer(artifacts, tmp_path):
    art = _art(artifacts, "interop_adamw")
    spec = _spec("interop_adamw")
    src = tmp_path / "torch.pt"
    torch.save({"model": spec.model.state_dict()}, src)
    run("import-checkpoint", art, src, "--out", tmp_path / "x.ckpt")
    from trainstep import checkpoint
    model, optim, meta = checkpoint.load(str(tmp_path / "x.ckpt"))
    assert meta["step"] == "0" and float(optim["optim/step"]) == 0
    assert all(not v.any() for k, v in optim.items())
