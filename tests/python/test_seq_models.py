"""Sequence models end to end: the character transformer (output layer tied
to the token embedding) and the 2-layer LSTM language model of examples/.

Parity: `trainstep verify` replays 5 eager PyTorch steps (dropout on, the
trainstep RNG) at the default tolerance, 1e-4 of each tensor's largest
magnitude, with fusion on and off. Measured on this machine (worst tensor):
transformer 3.3e-5 (blocks.0.attn.proj.bias), LSTM 9e-7. Eager PyTorch's own
spread under a 1e-7 relative perturbation of the initial weights is 4.4e-5
and 4e-7: the specs use eps=1e-5 in Adam/AdamW, where eager is reproducible
to that level (with eps=1e-8 the transformer's spread is 8e-4: Adam turns
gradients at the rounding-noise floor into lr-sized steps).

Training: a short run on real text (Debian's fortunes) must lower the
held-out loss, and the checkpoint must load back into the PyTorch model and
give the same held-out loss there. Runs use one thread: these models' many
small kernels gain nothing from a second one on a busy 2-core machine.
"""
import os
import re
import sys

import pytest
import torch

from conftest import ROOT, SPECS, run

sys.path.insert(0, os.path.join(ROOT, "python"))
FORTUNES = "/usr/share/games/fortunes"
TRANSFORMER = os.path.join(ROOT, "examples", "transformer", "spec.py")
LSTM = os.path.join(ROOT, "examples", "lstm", "spec.py")
T = 64  # both specs' sequence length


@pytest.fixture(scope="session")
def transformer(char_transformer):
    return char_transformer


@pytest.fixture(scope="session")
def lstm(char_lstm):
    return char_lstm


@pytest.fixture(scope="session")
def text(tmp_path_factory):
    """64 KB of real text: the start of the `computers` fortune file."""
    src = os.path.join(FORTUNES, "computers")
    with open(src, "rb") as f:
        data = f.read(64000)
    path = tmp_path_factory.mktemp("text") / "fortunes.txt"
    path.write_bytes(data)
    return str(path), data


def _verify(path, *flags):
    p = run("verify", path, "--threads", "1", *flags, check=False)
    assert p.stdout.strip().splitlines()[-1] == "verify: ok", p.stdout + p.stderr
    return p.stdout


@pytest.mark.parametrize("flags", [(), ("--no-fusion",)], ids=["fused", "unfused"])
def test_transformer_matches_eager(transformer, flags):
    out = _verify(transformer, *flags)
    # One parameter for the tied embedding/output layer, updated once.
    assert "state tok_emb.weight" in out and "state head.weight" not in out
    assert "state optim/tok_emb.weight/exp_avg_sq" in out


@pytest.mark.parametrize("flags", [(), ("--no-fusion",)], ids=["fused", "unfused"])
def test_lstm_matches_eager(lstm, flags):
    out = _verify(lstm, *flags)
    assert "state lstm.weight_hh_l1" in out


def test_gru_with_inter_layer_dropout_matches_eager(artifacts):
    _verify(artifacts("gru_tiny", os.path.join(SPECS, "gru_tiny.py")))


def _test_loss(art, data, ckpt=None):
    args = ["eval", art, "--data", data, "--threads", 1] + (["--checkpoint", ckpt] if ckpt else [])
    m = re.search(r"test: loss ([0-9.]+), (perplexity|accuracy)", run(*args).stdout)
    assert m
    return float(m.group(1))


def _heldout_windows(data, seq=T):
    """The test split's windows as src/data/text.h defines them."""
    test = data[len(data) - len(data) // 10:]
    n = (len(test) - 1) // seq
    w = torch.tensor(list(test[:n * seq + 1]), dtype=torch.int64)
    x = torch.stack([w[i * seq:i * seq + seq] for i in range(n)])
    y = torch.stack([w[i * seq + 1:i * seq + seq + 1] for i in range(n)])
    return x, y


def _trained_spec(spec_path, ckpt):
    """The spec's model in eval mode with the C++ checkpoint loaded."""
    from trainstep import checkpoint
    from trainstep.exporter import load_spec
    spec = load_spec(spec_path)
    spec.model.load_state_dict(checkpoint.load_state_dict(ckpt))
    spec.model.eval()
    return spec


def _train_and_reload(art, spec_path, text, tmp_path, strict):
    """Trains one epoch on the text; returns (loss before, loss after, the
    spec with the checkpoint loaded into its model, missing keys)."""
    path, data = text
    dspec = f"text:{path}:{T}"
    before = _test_loss(art, dspec)
    ckpt = str(tmp_path / "m.ckpt")
    out = run("train", art, "--data", dspec, "--epochs", 1, "--save", ckpt, "--threads", 1).stdout
    n_train = (len(data) - len(data) // 10 - 1) // T
    n_test = (len(data) // 10 - 1) // T
    assert f"{n_train} train / {n_test} test samples" in out, out
    after = _test_loss(art, dspec, ckpt)

    from trainstep import checkpoint
    from trainstep.exporter import load_spec
    spec = load_spec(spec_path)
    missing, unexpected = spec.model.load_state_dict(checkpoint.load_state_dict(ckpt), strict=strict)
    assert not unexpected
    return before, after, spec, missing


def _torch_heldout_loss(spec, data):
    x, y = _heldout_windows(data)
    spec.model.eval()
    with torch.no_grad():
        out = spec.model(x)
        return float(torch.stack([spec.loss_fn(out[i:i + 1], y[i:i + 1])
                                  for i in range(x.shape[0])]).mean())


def test_transformer_learns_and_checkpoint_loads_in_pytorch(transformer, text, tmp_path):
    before, after, spec, _ = _train_and_reload(transformer, TRANSFORMER, text, tmp_path,
                                               strict=True)
    # 28 AdamW steps from the uniform guess (ln 256 = 5.55 nats per byte).
    assert before > 5.0 and after < before - 1.0, (before, after)
    # The checkpoint holds the tied tensor under both names; loading keeps
    # the tie (head.weight is still the embedding's Parameter).
    assert spec.model.head.weight is spec.model.tok_emb.weight
    assert abs(_torch_heldout_loss(spec, text[1]) - after) < 1e-4


def test_lstm_learns_and_checkpoint_loads_in_pytorch(lstm, text, tmp_path):
    before, after, spec, _ = _train_and_reload(lstm, LSTM, text, tmp_path, strict=True)
    assert before > 5.0 and after < before - 1.0, (before, after)
    # nn.LSTM's own state_dict names: the checkpoint loads with strict=True.
    assert abs(_torch_heldout_loss(spec, text[1]) - after) < 1e-4


def test_window_length_mismatch_is_named(transformer, text):
    p = run("train", transformer, "--data", f"text:{text[0]}:32", "--epochs", 1, "--threads", 1,
            check=False)
    assert p.returncode == 1
    assert ("input port 'idx' (int64[32, 64]) takes int64[64] a sample, but the data's "
            "field x: int64[32] (windows of 32 bytes") in p.stderr, p.stderr


def test_layered_rnn_dropout_is_per_layer_aten_with_trainstep_masks():
    """Under rng.stream a 2-layer nn.LSTM with dropout runs as two one-layer
    ATen LSTMs with the trainstep dropout between them."""
    from trainstep import rng
    torch.manual_seed(0)
    two = torch.nn.LSTM(5, 7, num_layers=2, dropout=0.4, batch_first=True)
    one_a = torch.nn.LSTM(5, 7, batch_first=True)
    one_b = torch.nn.LSTM(7, 7, batch_first=True)
    with torch.no_grad():
        for n, p in one_a.named_parameters():
            p.copy_(getattr(two, n))
        for n, p in one_b.named_parameters():
            p.copy_(getattr(two, n.replace("l0", "l1")))
    x = torch.randn(3, 4, 5)
    seed, offset = torch.tensor(7), torch.tensor(2)
    with rng.stream(seed, offset):
        y, (h, c) = two(x)
    with rng.stream(seed, offset):
        a, (ha, ca) = one_a(x)
        b, (hb, cb) = one_b(rng.dropout(a, 0.4, True))
    assert torch.equal(y, b)
    assert torch.equal(h, torch.cat([ha, hb])) and torch.equal(c, torch.cat([ca, cb]))
    # Eval mode: no dropout, plain ATen.
    two.eval()
    with rng.stream(seed, offset):
        assert torch.equal(two(x)[0], one_b(one_a(x)[0])[0])


def test_split_of_a_strided_view_verifies(tmp_path):
    """torch 1.13's functionalize turns split() of a transposed tensor into
    as_strided reads of the transpose's storage, which the capture rewrites
    into reads of the rebuilt storage (views.py); torch 2.x keeps the split
    (split_with_sizes of the transpose's copy). Both export and verify."""
    spec = os.path.join(SPECS, "strided_split.py")
    out = tmp_path / "x.tstep"
    run("export", spec, "--out", out)
    v = run("verify", out, check=False)
    assert v.stdout.strip().splitlines()[-1:] == ["verify: ok"], v.stdout + v.stderr


def test_sequence_first_lm_trains_from_text(text, tmp_path):
    """A (seq, batch) transformer LM (batch_dims=1) trains from the runtime's
    batch-major text windows: the data path moves the batch to dim 1. Its
    C++ test loss after an epoch equals eager PyTorch's on the held-out
    windows, fed (seq, batch), with the checkpoint loaded."""
    spec_path = os.path.join(SPECS, "real", "seq_first_lm.py")
    art = str(tmp_path / "sf.tstep")
    run("export", spec_path, "--out", art, "--golden-steps", 2, "--calibration-rounds", 0)
    path, data = text
    seq = 16
    dspec = f"text:{path}:{seq}"
    ckpt = str(tmp_path / "sf.ckpt")
    run("train", art, "--data", dspec, "--epochs", 1, "--save", ckpt, "--threads", 1)
    after = _test_loss(art, dspec, ckpt)

    spec = _trained_spec(spec_path, ckpt)
    x, y = _heldout_windows(data, seq)
    n = len(x)
    with torch.no_grad():
        losses = []
        for i in range(0, n, 8):  # the artifact's batches: 8 windows, (seq, batch)
            xb, yb = x[i:i + 8].t(), y[i:i + 8].t()
            out = spec.model(xb)
            losses += [spec.loss_fn(out[:, j:j + 1], yb[:, j:j + 1]) for j in range(xb.shape[1])]
    want = float(torch.stack(losses).mean())
    assert after < 5.0 and abs(after - want) <= 1e-4 * want, (after, want)


FLAT = os.path.join(SPECS, "flat_target.py")


def test_flattened_target_lm_trains_from_text(text, tmp_path):
    """word_language_model's way: the target flattened over (seq, batch),
    the LSTM's output too. The artifact's target port is (seq, batch) with
    the batch on dim 1 (the data path fills it); its eval step reports the
    batch's loss. After an epoch on text, C++ eval equals eager's loss over
    the same whole held-out batches, with the checkpoint loaded."""
    import json
    from trainstep import safetensors_io
    art = str(tmp_path / "flat.tstep")
    out = run("export", FLAT, "--out", art).stdout
    assert "eval: the batch's loss" in out, out
    _verify(art)
    program = json.loads(safetensors_io.load(art)[1]["program"])
    port = [p for p in program["functions"]["train_step"]["inputs"] if p["role"] == "target"][0]
    assert port["shape"] == [16, 8] and port["batch_dim"] == 1, port
    path, data = text
    seq = 16
    dspec = f"text:{path}:{seq}"
    ckpt = str(tmp_path / "flat.ckpt")
    run("train", art, "--data", dspec, "--epochs", 1, "--save", ckpt, "--threads", 1)
    ev = run("eval", art, "--data", dspec, "--checkpoint", ckpt, "--threads", 1).stdout
    m = re.search(r"loss ([0-9.]+) \((\d+) samples", ev)
    assert m, ev
    spec = _trained_spec(FLAT, ckpt)
    x, y = _heldout_windows(data, seq)
    n = len(x)
    with torch.no_grad():
        losses = [spec.loss_fn(spec.model(x[i:i + 8].t()), y[i:i + 8].t().reshape(-1))
                  for i in range(0, n - 7, 8)]  # whole batches of 8 windows
    want = float(torch.stack(losses).mean())
    assert int(m.group(2)) == 8 * len(losses)
    assert float(m.group(1)) < 5.0 and abs(float(m.group(1)) - want) <= 1e-4 * want, (m.group(1), want)


def test_flattened_target_with_per_sequence_output_splits_eval(tmp_path):
    """A transformer whose output keeps (seq, batch): with the target
    flattened, the eval step still gives each sequence's loss."""
    art = str(tmp_path / "flat_tr.tstep")
    out = run("export", FLAT, "--out", art, env={"FT": "transformer"}).stdout
    assert "eval: per-sample loss" in out, out
    assert "eval sample_loss" in _verify(art)
