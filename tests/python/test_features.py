"""Training-loop features against eager PyTorch: param groups, frozen and
unused parameters, tied weights, gradient clipping, gradients by name,
gradient accumulation, per-step LR schedules.

Whole-step parity goes through `trainstep verify` (the golden trace is eager
PyTorch with the real torch.optim, clip_grad_norm_ and the same dropout
masks; tolerance as in test_parity.py). Artifacts with grad_step/apply_step
are verified twice: as one train_step and split into grad + apply, whose
step-0 gradients are compared with eager's .grad too.
"""
import json
import os
import re

import torch

import pytest

from conftest import SPECS, run

pytestmark = [pytest.mark.asan]


def _verify(path):
    p = run("verify", path, "--threads", "1", check=False)
    assert p.stdout.strip().splitlines()[-1] == "verify: ok", p.stdout + p.stderr
    return p.stdout


def _program(path):
    from trainstep import safetensors_io
    _, meta = safetensors_io.load(path)
    return json.loads(meta["program"])


def _spec(name):
    return os.path.join(SPECS, name)


def test_two_param_groups_match_eager(artifacts):
    """Weights with weight decay, biases without and at twice the LR."""
    art = artifacts("groups_sgd", _spec("groups_sgd.py"))
    out = _verify(art)
    assert "state optim/fc1.bias/momentum_buffer" in out
    groups = _program(art)["optimizer"]["groups"]
    assert [g["options"]["weight_decay"] for g in groups] == [1e-2, 0.0]
    assert [g["lr_scale"] for g in groups] == [1.0, 2.0]
    assert groups[1]["params"] == ["fc1.bias", "fc2.bias", "fc3.bias"]


def test_frozen_and_unused_parameters_match_eager(artifacts):
    """torch skips a parameter whose .grad is None: no update, no state
    change. fc1 is frozen, `unused` never runs; both sit in the optimizer."""
    art = artifacts("frozen_unused", _spec("frozen_unused.py"))
    _verify(art)  # golden/final holds every parameter: fc1, unused unchanged in eager too
    prog = _program(art)
    kinds = {s["name"]: s["kind"] for s in prog["state"]}
    for n in ("fc1.weight", "fc1.bias", "unused.weight", "unused.bias"):
        assert kinds[n] == "frozen", n
        assert not any(k.startswith(f"optim/{n}/") for k in kinds), n
    assert kinds["fc2.weight"] == "param" and "optim/fc2.weight/sum" in kinds
    train = prog["functions"]["train_step"]
    updated = {o["state"] for o in train["outputs"] if o["role"] == "state"}
    assert not updated & {"fc1.weight", "unused.weight"}
    from trainstep import safetensors_io
    t, _ = safetensors_io.load(art)
    # Eager changed fc2 (so the check above can fail) and not the others.
    assert not torch.equal(t["state/fc2.weight"], t["golden/final/fc2.weight"])
    for n in ("fc1.weight", "unused.weight", "unused.bias"):
        assert torch.equal(t[f"state/{n}"], t[f"golden/final/{n}"]), n


def test_tied_embedding_and_output_projection_match_eager(artifacts):
    """One Parameter in two places gets the summed gradient of both uses."""
    art = artifacts("tied_lm", _spec("tied_lm.py"))
    out = _verify(art)
    assert "grad emb.weight" in out  # the split path's gradient vs eager's .grad
    prog = _program(art)
    names = [s["name"] for s in prog["state"]]
    assert "emb.weight" in names and "out.weight" not in names
    assert prog["aliases"] == {"out.weight": "emb.weight"}


def test_tied_weights_checkpoint_loads_strictly_in_pytorch(artifacts, small_data, tmp_path):
    import sys
    sys.path.insert(0, SPECS)
    from small_models import TiedMLP
    from trainstep import checkpoint
    art = artifacts("tied_mlp", _spec("tied_mlp.py"))
    ckpt = tmp_path / "t.ckpt"
    run("train", art, "--data", f"idx:{small_data}", "--max-batches", 3, "--save", ckpt)
    sd = checkpoint.load_state_dict(str(ckpt))
    assert torch.equal(sd["mid1.weight"], sd["mid2.weight"])
    model = TiedMLP()
    model.load_state_dict(sd)  # strict: every state_dict name is there
    assert model.mid2.weight is model.mid1.weight
    run("train", art, "--data", f"idx:{small_data}", "--max-batches", 1, "--resume", ckpt)


def test_clip_grad_norm_matches_eager_and_clips(artifacts):
    art = artifacts("clip_sgd", _spec("clip_sgd.py"))
    out = _verify(art)
    assert "grad+apply state fc1.weight" in out
    assert _program(art)["clip_grad_norm"] == {"max_norm": 0.5, "norm_type": 2.0}
    # The golden step-0 gradients (before clipping) have a norm above
    # max_norm, so clipping changed the update.
    from trainstep import safetensors_io
    t, _ = safetensors_io.load(art)
    norm = torch.stack([v.norm() for k, v in t.items() if k.startswith("golden/grad/")]).norm()
    assert norm > 0.5 * 1.5, norm


def test_clip_grad_norm_changes_the_update(artifacts, tmp_path):
    """The same spec without clipping gives different final state, so the
    clip test above can fail."""
    from trainstep import safetensors_io
    t_clip, _ = safetensors_io.load(artifacts("clip_sgd", _spec("clip_sgd.py")))
    spec = tmp_path / "noclip.py"
    spec.write_text(f"import sys\nsys.path.insert(0, {SPECS!r})\nimport clip_sgd\n"
                    "def build():\n    s = clip_sgd.build()\n    s.clip_grad_norm = None\n"
                    "    return s\n")
    t_plain, _ = safetensors_io.load(artifacts("noclip_sgd", str(spec)))
    a, b = t_clip["golden/final/fc1.weight"], t_plain["golden/final/fc1.weight"]
    assert (a - b).abs().max() > 1e-3


def test_bad_clip_option_fails_at_export(tmp_path):
    spec = tmp_path / "badclip.py"
    spec.write_text(f"import sys\nsys.path.insert(0, {SPECS!r})\nimport clip_sgd\n"
                    "def build():\n    s = clip_sgd.build()\n    s.clip_grad_norm = -1.0\n"
                    "    return s\n")
    p = run("export", spec, "--out", tmp_path / "x.tstep", check=False)
    assert p.returncode == 1
    assert "clip_grad_norm=-1.0: must be a positive number" in p.stderr, p.stderr


def test_default_export_has_no_gradient_functions(artifacts):
    """Gradients cost nothing unless asked for: train_step outputs none."""
    prog = _program(artifacts("groups_sgd", _spec("groups_sgd.py")))
    assert set(prog["functions"]) == {"train_step", "eval_step"}
    roles = {o["role"] for o in prog["functions"]["train_step"]["outputs"]}
    assert roles == {"loss", "state"}


def _final_params(ckpt):
    from trainstep import checkpoint
    model, _, meta = checkpoint.load(str(ckpt))
    return model, meta


def test_accumulate_4x16_matches_one_batch_of_64(artifacts, small_data, tmp_path):
    """Mean-reduced loss, no batch-dependent layers: averaging the gradients
    of 4 batches of 16 is one step on their 64 samples (the data order is
    per sample, so batches 4k..4k+3 of 16 are batch k of 64)."""
    a16 = artifacts("accum16", _spec("accum16.py"))
    a64 = artifacts("accum64", _spec("accum64.py"))
    common = ["--data", f"idx:{small_data}", "--threads", 1, "--seed", 3]
    c16, c64 = tmp_path / "a16.ckpt", tmp_path / "a64.ckpt"
    out16 = run("train", a16, *common, "--accumulate", 4, "--save", c16).stdout
    out64 = run("train", a64, *common, "--save", c64).stdout
    m16, meta16 = _final_params(c16)
    m64, meta64 = _final_params(c64)
    assert meta16["step"] == meta64["step"] == "10"  # 640 samples / 64
    for k in m64:
        # float32 summation order only (sum of 4 partial means vs one mean).
        torch.testing.assert_close(m16[k], m64[k], rtol=1e-4, atol=1e-5, msg=k)
    # The mean training losses agree too.
    l16 = float(re.search(r"train loss ([0-9.]+)", out16).group(1))
    l64 = float(re.search(r"train loss ([0-9.]+)", out64).group(1))
    assert abs(l16 - l64) < 1e-3, (l16, l64)
    # And without accumulation the batch-16 run takes 4x the steps and ends elsewhere.
    c1 = tmp_path / "a1.ckpt"
    run("train", a16, *common, "--save", c1)
    m1, meta1 = _final_params(c1)
    assert meta1["step"] == "40"
    assert (m1["fc1.weight"] - m64["fc1.weight"]).abs().max() > 1e-3


def test_resume_continues_with_the_checkpoints_accumulate(artifacts, small_data, tmp_path):
    """The checkpoint records --accumulate: a resume without the option
    continues with it, and ends with the bits of the uninterrupted run."""
    a16 = artifacts("accum16", _spec("accum16.py"))
    common = ["--data", f"idx:{small_data}", "--threads", 1, "--seed", 3, "--max-batches", 8]
    straight, first = tmp_path / "straight.ckpt", tmp_path / "first.ckpt"
    run("train", a16, *common, "--epochs", 2, "--accumulate", 4, "--save", straight)
    run("train", a16, *common, "--epochs", 1, "--accumulate", 4, "--save", first)
    _, meta = _final_params(first)
    assert meta["accumulate"] == "4" and meta["step"] == "2", meta
    resumed = tmp_path / "resumed.ckpt"
    run("train", a16, *common, "--epochs", 1, "--resume", first, "--save", resumed)
    m_straight, meta_straight = _final_params(straight)
    m_resumed, meta_resumed = _final_params(resumed)
    assert meta_resumed["step"] == meta_straight["step"] == "4"
    for k in m_straight:
        assert torch.equal(m_resumed[k], m_straight[k]), k


def test_a_resumed_accumulation_asks_for_its_n_again(artifacts, small_data, tmp_path):
    """Without --grads the session cuts grad_step and apply_step from
    train_step only when asked: resuming an --accumulate run says so."""
    art = artifacts("groups_sgd", _spec("groups_sgd.py"))
    ckpt = tmp_path / "acc.ckpt"
    data = ["--data", f"idx:{small_data}", "--max-batches", 4]
    run("train", art, *data, "--accumulate", 2, "--save", ckpt)
    p = run("train", art, *data, "--resume", ckpt, check=False)
    assert p.returncode == 1
    assert "the checkpoint trained with --accumulate 2: give --accumulate 2 again" in p.stderr, \
        p.stderr
    run("train", art, *data, "--resume", ckpt, "--accumulate", 2)


def repeated_sample_data(dirpath, n_train, index=0):
    """n_train copies of one Fashion-MNIST training image: every batch is the
    same tensor whatever the shuffle, so eager can replay a C++ run."""
    import numpy as np
    from conftest import FASHION, _write_idx, read_idx
    os.makedirs(dirpath, exist_ok=True)
    img = read_idx(f"{FASHION}/train-images-idx3-ubyte.gz")[index]
    lab = read_idx(f"{FASHION}/train-labels-idx1-ubyte.gz")[index]
    _write_idx(f"{dirpath}/train-images-idx3-ubyte.gz", np.repeat(img[None], n_train, 0))
    _write_idx(f"{dirpath}/train-labels-idx1-ubyte.gz", np.full(n_train, lab, np.uint8))
    for kind in ("images-idx3", "labels-idx1"):
        src = read_idx(f"{FASHION}/t10k-{kind}-ubyte.gz")[:64]
        _write_idx(f"{dirpath}/t10k-{kind}-ubyte.gz", src)
    x = torch.from_numpy(img.copy()).float()
    x = ((x / 255.0 - 0.1307) / 0.3081).reshape(1, 1, 28, 28)
    return x, int(lab)


def eager_steps(model, opt, x, y, seed, first_step, n):
    """n eager steps on batch (x, y) with the trainstep RNG at offsets
    first_step, first_step + 1, ... (dropout masks as in C++)."""
    import torch.nn.functional as F
    from trainstep import rng
    model.train()
    for i in range(n):
        with rng.stream(torch.tensor(seed), torch.tensor(first_step + i)):
            opt.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
        opt.step()


def test_per_step_lr_schedule_matches_eager(artifacts, tmp_path):
    """`--lr-schedule-unit step`: 3 batches an epoch, 2 epochs, StepLR(2,
    0.5) stepped every step (per epoch would change the LR once); dropout on,
    so the RNG offsets (the global step) must line up too."""
    import sys
    sys.path.insert(0, SPECS)
    import groups_sgd
    art = artifacts("groups_sgd", _spec("groups_sgd.py"))
    x1, label = repeated_sample_data(str(tmp_path / "d"), 96)
    ckpt = tmp_path / "s.ckpt"
    out = run("train", art, "--data", f"idx:{tmp_path / 'd'}", "--epochs", 2, "--seed", 4,
              "--lr-schedule", "step:2:0.5", "--lr-schedule-unit", "step", "--save", ckpt,
              "--threads", 1).stdout
    assert "epoch 2: lr 0.025" in out  # the LR of the epoch's first step (step 3)
    spec = groups_sgd.build()
    model, opt = spec.model, spec.optimizer
    sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    x, y = x1.expand(32, 1, 28, 28).contiguous(), torch.full((32,), label)
    for step in range(6):
        eager_steps(model, opt, x, y, seed=4, first_step=step, n=1)
        sched.step()
    got, meta = _final_params(ckpt)
    assert meta["step"] == "6" and float(meta["lr"]) == 0.05 * 0.25
    for n, p in model.state_dict().items():
        torch.testing.assert_close(got[n], p, rtol=1e-4, atol=1e-5, msg=n)
    # Per epoch, the same run ends elsewhere: the check above can fail.
    ck2 = tmp_path / "e.ckpt"
    run("train", art, "--data", f"idx:{tmp_path / 'd'}", "--epochs", 2, "--seed", 4,
        "--lr-schedule", "step:2:0.5", "--save", ck2, "--threads", 1)
    other, _ = _final_params(ck2)
    assert (other["fc1.weight"] - got["fc1.weight"]).abs().max() > 1e-4
