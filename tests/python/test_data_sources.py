"""`trainstep train` on the user's own data (docs/data.md): a model with
three inputs from an .npz written by numpy, and a token LM from a flat
uint16 file, nanoGPT's train.bin. For each, a run resumed mid-epoch ends
bit-identical to an uninterrupted one, and the first steps match eager
PyTorch fed the same batches."""
import importlib.util
import os

import numpy as np
import pytest
import torch

from conftest import SPECS, run


def _spec(name):
    s = importlib.util.spec_from_file_location(name, os.path.join(SPECS, f"{name}.py"))
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m


@pytest.fixture(scope="module")
def three_inputs(artifacts):
    return artifacts("data_three_inputs", os.path.join(SPECS, "data_three_inputs.py"))


@pytest.fixture(scope="module")
def token_lm(artifacts):
    return artifacts("data_token_lm", os.path.join(SPECS, "data_token_lm.py"))


# The ports are named after forward(ids, mask, types), and the lone target
# takes the field "label": no --map needed.
MAP = []


def _write_npz(path, n, seed, compressed=False):
    spec = _spec("data_three_inputs")
    ids, mask, types, label = (t.numpy() for t in spec.batch(n, seed))
    save = np.savez_compressed if compressed else np.savez
    save(path, ids=ids, mask=mask, types=types, label=label, note=np.zeros((n, 2), np.float32))
    return ids, mask, types, label


def _load(path):
    from trainstep import checkpoint
    model, opt, meta = checkpoint.load(str(path))
    return {**model, **opt}, meta


def _assert_same_state(a_path, b_path):
    a, a_meta = _load(a_path)
    b, b_meta = _load(b_path)
    assert a_meta["step"] == b_meta["step"]
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def _resumed_mid_epoch(art, data_args, tmp_path, every, resume_step):
    """Two epochs straight, with checkpoints every `every` steps; then the
    run again from the checkpoint at `resume_step` (inside epoch 2), with
    3 loader threads."""
    common = [*data_args, "--threads", 1, "--seed", 3]
    straight, resumed = tmp_path / "a.ckpt", tmp_path / "c.ckpt"
    run("train", art, *common, "--epochs", 2, "--save", straight, "--checkpoint-every", every,
        "--keep", 50)
    ckpt = tmp_path / "a.checkpoints" / f"step-{resume_step:010d}.ckpt"
    assert ckpt.exists(), sorted(os.listdir(tmp_path / "a.checkpoints"))
    # The resumed half reads with 3 loader threads: batches do not depend on it.
    out = run("train", art, *common, "--epochs", 1, "--resume", ckpt, "--save", resumed,
              "--data-threads", 3).stdout
    assert "epoch 2:" in out, out
    _assert_same_state(straight, resumed)
    return out


def test_npz_three_inputs_resume_is_bit_identical(three_inputs, tmp_path):
    _write_npz(tmp_path / "d.npz", 200, seed=5, compressed=True)
    # 180 train samples (the last tenth tests): 22 batches of 8 an epoch.
    out = _resumed_mid_epoch(three_inputs, ["--data", f"npz:{tmp_path / 'd.npz'}", *MAP],
                             tmp_path, every=7, resume_step=28)
    assert "test loss" in out and "accuracy" in out, out


def _eager_steps(spec, batches):
    torch.manual_seed(0)
    built = spec.build()
    model, opt, loss_fn = built.model, built.optimizer, built.loss_fn
    for inputs, target in batches:
        opt.zero_grad()
        loss_fn(model(*inputs), target).backward()
        opt.step()
    return {k: v.detach() for k, v in model.state_dict().items()}


def _assert_close_to_eager(ckpt, eager):
    got, _ = _load(ckpt)
    for k, v in eager.items():
        # One batch an epoch, its samples shuffled: the sums run in another
        # order, so equal up to rounding, as verify's tolerance allows.
        torch.testing.assert_close(got[k], v, rtol=1e-4, atol=1e-5, msg=k)


def test_npz_matches_eager_fed_the_same_batches(three_inputs, tmp_path):
    # The train file holds exactly one batch: each epoch is one step on it,
    # whatever the shuffle; --test-data names a separate file, read whole.
    ids, mask, types, label = _write_npz(tmp_path / "train.npz", 8, seed=6)
    _write_npz(tmp_path / "test.npz", 20, seed=7)
    ckpt = tmp_path / "m.ckpt"
    out = run("train", three_inputs, "--data", f"npz:{tmp_path / 'train.npz'}", "--test-data",
              f"npz:{tmp_path / 'test.npz'}", *MAP, "--epochs", 3, "--save", ckpt).stdout
    assert "8 train / 20 test samples" in out, out
    spec = _spec("data_three_inputs")
    batch = ((torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types)),
             torch.from_numpy(label))
    _assert_close_to_eager(ckpt, _eager_steps(spec, [batch] * 3))


M64 = (1 << 64) - 1


def _mix(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def sample_random(seed, epoch, i):
    """trainstep/dataset.h's sample_random, replayed."""
    return _mix(_mix(_mix(seed) ^ epoch) ^ i)


def test_token_file_matches_eager_fed_the_same_windows(token_lm, tmp_path):
    spec = _spec("data_token_lm")
    rng = np.random.default_rng(1)
    train = rng.integers(0, spec.VOCAB, 52).astype(np.uint16)  # (52 - 1) // 6 = 8 windows
    train.tofile(tmp_path / "train.bin")
    rng.integers(0, spec.VOCAB, 200).astype(np.uint16).tofile(tmp_path / "val.bin")
    ckpt, seed, block = tmp_path / "m.ckpt", 11, spec.BLOCK
    out = run("train", token_lm, "--data", f"tokens:{tmp_path / 'train.bin'}:{block}",
              "--test-data", f"tokens:{tmp_path / 'val.bin'}:{block}:uint16", "--seed", seed,
              "--epochs", 3, "--save", ckpt).stdout
    assert "perplexity" in out, out
    batches = []
    t = torch.from_numpy(train.astype(np.int64))
    for e in range(3):
        starts = [sample_random(seed, e, i) % (len(train) - block) for i in range(8)]
        x = torch.stack([t[s:s + block] for s in starts])
        y = torch.stack([t[s + 1:s + 1 + block] for s in starts])
        batches.append(((x,), y))
    _assert_close_to_eager(ckpt, _eager_steps(spec, batches))


def test_token_file_resume_is_bit_identical(token_lm, tmp_path):
    tokens = np.random.default_rng(2).integers(0, 50, 1000).astype(np.uint16)
    tokens.tofile(tmp_path / "corpus.bin")
    # 900 train tokens: 149 windows of 6 + 1, 18 batches of 8 an epoch.
    _resumed_mid_epoch(token_lm, ["--data", f"tokens:{tmp_path / 'corpus.bin'}:6"], tmp_path,
                       every=5, resume_step=25)


def test_ports_take_forward_parameter_names(three_inputs):
    from trainstep import safetensors_io
    import json
    _, meta = safetensors_io.load(str(three_inputs))
    ports = json.loads(meta["program"])["functions"]["train_step"]["inputs"]
    assert [(p["name"], p["role"]) for p in ports if p["role"] in ("input", "target")] == \
        [("ids", "input"), ("mask", "input"), ("types", "input"), ("target", "target")]


def test_map_feeds_a_port_from_a_field_of_another_name(three_inputs, tmp_path):
    ids, mask, types, label = _write_npz(tmp_path / "d.npz", 40, seed=5)
    np.savez(tmp_path / "renamed.npz", ids=ids, attention=mask, types=types, label=label)
    a = run("train", three_inputs, "--data", f"npz:{tmp_path / 'd.npz'}", "--threads", 1).stdout
    b = run("train", three_inputs, "--data", f"npz:{tmp_path / 'renamed.npz'}", "--threads", 1,
            "--map", "mask=attention").stdout
    assert _epoch_losses(a) and _epoch_losses(a) == _epoch_losses(b), (a, b)


def _epoch_losses(out):
    return [line.split(", test loss")[0] for line in out.splitlines() if line.startswith("epoch")]


def test_missing_field_names_port_and_fields(three_inputs, tmp_path):
    ids, mask, types, label = _write_npz(tmp_path / "d.npz", 40, seed=5)
    np.savez(tmp_path / "no_mask.npz", ids=ids, types=types, label=label)
    p = run("train", three_inputs, "--data", f"npz:{tmp_path / 'no_mask.npz'}", check=False)
    assert p.returncode != 0
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert ("input port 'mask' (int64[8, 12]) has no field of that name in the data "
            f"(npz file {tmp_path / 'no_mask.npz'}") in err, err
    assert "its fields: ids: int64[12], types: int64[12], label: int64[]. " \
           "Name one with --map mask=FIELD" in err, err
    p = run("train", three_inputs, "--data", f"npz:{tmp_path / 'd.npz'}", "--map", "types=note",
            check=False)
    assert "input port 'types' (int64[8, 12]) takes int64[12] a sample, but the data's field " \
           "note: float32[2]" in p.stderr, p.stderr
    p = run("train", three_inputs, "--data", f"npz:{tmp_path / 'd.npz'}", "--map", "nope=ids",
            check=False)
    assert "--map nope=ids: the step has no port 'nope' (its ports: ids, mask, types, target)" \
        in p.stderr, p.stderr
