"""trainstep.export(train_step, example_batch, path): a training step as the
user's own script writes it (python/trainstep/step_fn.py), exported,
verified against eager PyTorch, and trained from C++."""
import os
import subprocess
import sys

import pytest
import torch

from conftest import BIN, ROOT, SPECS, run

SCRIPT = os.path.join(SPECS, "train_step_fn.py")


def _export(tmp_path, *extra):
    art = str(tmp_path / "fn.tstep")
    env = dict(os.environ, TRAINSTEP_BIN=BIN, TRAINSTEP_PYTHON=sys.executable,
               PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, SCRIPT, art, *extra], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return art, p.stdout


@pytest.mark.parametrize("form", ["tuple", "dict"])
def test_train_step_function_exports_verifies_and_trains(tmp_path, small_data, form):
    art, out = _export(tmp_path, *(["dict"] if form == "dict" else []))
    assert "clip 1.0" in out  # clip_grad_norm_ inside the function is captured
    v = run("verify", art, "--threads", "1", check=False)
    assert v.returncode == 0 and v.stdout.strip().splitlines()[-1] == "verify: ok", v.stdout
    assert "eval batch_loss" in v.stdout
    t = run("train", art, "--data", f"idx:{small_data}", "--epochs", 1, "--threads", 1).stdout
    assert "epoch 1:" in t and "test loss" in t, t


def test_eval_fn_gives_each_samples_loss(tmp_path, small_data):
    """eval_fn returns (per-sample loss, logits): the eval step splits the
    loss per sample, so evaluation covers every test sample."""
    art, out = _export(tmp_path, "eval")
    v = run("verify", art, "--threads", "1", check=False)
    assert v.returncode == 0 and v.stdout.strip().splitlines()[-1] == "verify: ok", v.stdout
    assert "eval sample_loss" in v.stdout and "eval output/0" in v.stdout, v.stdout
    e = run("eval", art, "--data", f"idx:{small_data}", "--threads", 1).stdout
    assert "left out" not in e, e


def test_eval_fn_that_returns_no_loss_is_one_line(tmp_path):
    import trainstep
    from trainstep.errors import CaptureError
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = (torch.randn(4, 3), torch.randint(0, 2, (4,)))

    def train(b):
        loss = torch.nn.functional.cross_entropy(model(b[0]), b[1])
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    for bad, says in ((lambda b: "loss", "return the loss (a tensor)"),
                      (lambda b: model(b[0]), "loss has shape [4, 2]")):
        with pytest.raises(CaptureError, match=r"\(eval_fn\)") as e:
            trainstep.export(train, batch, str(tmp_path / "x.tstep"), eval_fn=bad,
                             calibration_rounds=0)
        assert says in str(e.value), str(e.value)


def _spec_error(fn, batch, **kw):
    from trainstep import step_fn
    from trainstep.errors import CaptureError
    with pytest.raises(CaptureError) as e:
        step_fn.spec_from(fn, batch, **kw)
    return str(e.value)


def test_what_it_cannot_tell_is_one_line():
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(a.parameters(), lr=0.1)
    batch = (torch.randn(4, 2), torch.randn(4, 2))

    def two_models(batch):
        loss = (a(batch[0]) + b(batch[0])).sum()
        loss.backward()
        opt.step()
    assert "cannot tell its model (found by name: a, b)" in _spec_error(two_models, batch)

    def no_step(batch):
        a(batch[0]).sum().backward()
    assert "never calls optimizer.step()" in _spec_error(no_step, batch, model=a, optimizer=opt)

    def no_backward(batch):
        opt.step()
        return a(batch[0]).sum()
    assert "never calls loss.backward()" in _spec_error(no_backward, batch, model=a)
    assert "name its target key" in _spec_error(no_step, {"x": batch[0]}, model=a,
                                                 optimizer=opt)
