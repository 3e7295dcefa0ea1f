"""Models written the way public code writes them (tests/python/specs/real/),
not reshaped for trainstep: each exports and verifies at verify's default
tolerance, under whichever torch runs pytest (make test runs both).

Patterns covered (issue 13's table):
  init_hidden_lm      word_language_model's init_hidden: next(self.parameters()).new_zeros
  super_resolution    super_resolution's nn.PixelShuffle net
  structured_outputs  a dict, a namedtuple and a dataclass returned by forward
  structured_inputs   a dict batch, a tuple of features and a dict target
  several_targets     a dict target of three tensors (tags on the sequence-first
                      batch dim 1, a topic and a float length on dim 0)
  examples/vae        pytorch/examples' VAE returning (recon, mu, logvar)
  channel_dropout     nn.Dropout2d/Dropout1d/AlphaDropout on the Philox stream
  activations         LeakyReLU, PReLU, ELU, SELU, CELU, Softplus, Mish, SiLU,
                      Hardtanh, ReLU6, Softsign, Tanhshrink, LogSigmoid, Hardsigmoid
  style_transfer      fast_neural_style's kind of net: reflection pads, affine
                      InstanceNorm2d, residual blocks, nearest upsampling
  frozen_adagrad      a frozen block and two Adagrad groups, 8 golden steps
                      (the calibrated tolerance, golden.py)
  einsum_mixed        einsum attention (torch's own decomposition into bmm) and
                      float64 parameters in a float32 model, following torch's
                      promotion (a 0-d float64 keeps float32, a float64 [D]
                      scale makes float64)
  fits_fast           MNASNet's BatchNorm momentum (1 - 0.9997) and a model that
                      fits its batch: updates resolved to the state's rounding,
                      per-sample losses of ~1e-4 judged at the losses' scale
  resnet_kinks        a ResNet-18-shaped net at batch 4, 64x64: BatchNorm over
                      16 values turns a ReLU flipped by reordering into a
                      different trajectory, which the calibration must see
  rnn_last_step       mnist_rnn's output[:, -1, :] of a batch-first LSTM (a
                      strided read of a transposed value on 1.13, views.py)
  stochastic_depth    torchvision's stochastic depth (Tensor.bernoulli_),
                      torch.randn noise and GroupNorm
  window_mask         Swin's shifted-window mask: Python numbers written into
                      slices of a tensor made in forward
  seq_first_gru       a batch_first=False GRU: (seq, batch, feature) input, the
                      batch on dim 1 inferred from the example batch
  cached_mask         word_language_model's TransformerModel caching its mask in
                      a plain attribute (None at first) and a hasattr cache;
                      state carried across batches is refused, a tensor only
                      written is not
  seq_first_lm        word_language_model's kind of sequence-first transformer
                      LM, batch_dims=1 declared (trains from text in
                      test_seq_models.py)
  double_lstm         time_sequence_prediction's float64 LSTMCell loop
  scatter_grid        writes through two index tensors: grid[:, rows, cols] = t
                      and index_put(..., accumulate=True) with repeats
  index_patterns      h[:, rows, :, cols] (index tensors apart: their dims
                      first), bool-mask writes from a buffer, and
                      g[rows, :, cols] = v
  pads, upsampling, conv_variants
                      reflection/replication/constant pads, repeat, cumsum;
                      nearest/bilinear upsampling, avg and adaptive pools;
                      Conv1d, ConvTranspose1d/2d (also in float64)
The eval step returns every tensor leaf of the output, named by its path;
verify checks each against eager.
"""
import json
import os

import pytest
import torch

from conftest import ROOT, SPECS, run
from test_errors import _one_line_error

REAL = os.path.join(SPECS, "real")


def _export_verify(tmp_path, spec):
    out = tmp_path / (os.path.basename(spec)[:-3] + ".tstep")
    run("export", spec, "--out", out)
    p = run("verify", out, "--threads", "1")
    assert p.stdout.strip().splitlines()[-1] == "verify: ok", p.stdout
    return out, p.stdout


def _eval_outputs(path):
    from trainstep import safetensors_io
    _, meta = safetensors_io.load(str(path))
    outs = json.loads(meta["program"])["functions"]["eval_step"]["outputs"]
    return [o.get("name") for o in outs if o["role"] == "output"]


@pytest.mark.parametrize("name", ["init_hidden_lm", "super_resolution", "channel_dropout", "double_lstm",
                                  "activations", "upsampling", "pads", "style_transfer",
                                  "frozen_adagrad", "rnn_last_step",
                                  "stochastic_depth", "window_mask",
                                  "seq_first_gru", "conv_variants", "scatter_grid",
                                  "cached_mask", "einsum_mixed", "fits_fast"])
def test_verifies(tmp_path, name):
    _export_verify(tmp_path, os.path.join(REAL, name + ".py"))


@pytest.mark.skipif(not torch.__version__.startswith("1."),
                    reason="CI time: 2.x's eager conv runs this net's golden and calibration "
                           "steps 8x slower here (60 s); the calibration is the same code")
def test_calibration_sees_relu_flips_under_batch_norm(tmp_path):
    _export_verify(tmp_path, os.path.join(REAL, "resnet_kinks.py"))


def test_float64_transposed_convolutions(tmp_path, monkeypatch):
    monkeypatch.setenv("DTYPE", "float64")  # run() passes the environment on to export
    _export_verify(tmp_path, os.path.join(REAL, "conv_variants.py"))


@pytest.mark.parametrize("kind", ["dict", "namedtuple", "dataclass"])
def test_structured_outputs(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("OUTPUT", kind)  # run() passes the environment on to export
    out, text = _export_verify(tmp_path, os.path.join(REAL, "structured_outputs.py"))
    # The tensor leaves in the structure's order; the str field and the
    # dict's float are constants, not outputs.
    names = ["output/logits", "output/aux/0", "output/aux/1"]
    assert _eval_outputs(out) == names
    for n in names:
        assert f"eval {n} " in text, text


def _ports(path, fn="train_step"):
    from trainstep import safetensors_io
    _, meta = safetensors_io.load(str(path))
    return json.loads(meta["program"])["functions"][fn]["inputs"]


def test_structured_inputs(tmp_path):
    """A dict batch (ids, mask and a str option), a tuple of features and a
    dict target: one port per tensor leaf, named by its path from forward's
    parameter (forward(self, batch, extras)); the str stays a constant of
    the capture."""
    out, _ = _export_verify(tmp_path, os.path.join(REAL, "structured_inputs.py"))
    for fn in ("train_step", "eval_step"):
        data = [(p["name"], p["role"], p.get("index")) for p in _ports(out, fn)
                if p["role"] in ("input", "target")]
        assert data == [("batch/ids", "input", 0), ("batch/mask", "input", 1),
                        ("extras/0", "input", 2), ("target/label", "target", 0)]


    # Fashion-MNIST has fields x and y only: `train --data` names the port
    # without a field, and the fields there are.
    p = run("train", out, "--data", "fashion-mnist", "--max-batches", 1, check=False)
    assert p.returncode != 0
    assert ("input port 'batch/ids' (int64[6, 7]) has no field of that name in the data "
            "(28x28 images with int64 labels); its fields: x: float32[28, 28], y: int64[]. "
            "Name one with --map batch/ids=FIELD") in p.stderr, p.stderr


def _export_refused(tmp_path, spec, *needles):
    p = run("export", spec, "--out", tmp_path / "x.tstep", check=False)
    assert not (tmp_path / "x.tstep").exists()
    return _one_line_error(p, *needles, prefix="trainstep export: ")


def test_state_carried_across_batches_in_an_attribute_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("CARRY", "1")
    spec = os.path.join(REAL, "cached_mask.py")
    err = _export_refused(tmp_path, spec,
                          "the plain attribute 'memory' and it changes from one batch to the next",
                          "self.register_buffer('memory', ...)")
    with open(spec) as f:
        line = next(i for i, t in enumerate(f, 1) if "self.memory = x.detach()" in t)
    assert err.startswith(f"trainstep export: {spec}:{line}: "), err


def test_an_attribute_forward_only_writes_may_change(tmp_path, monkeypatch):
    monkeypatch.setenv("CARRY", "write")
    _export_verify(tmp_path, os.path.join(REAL, "cached_mask.py"))


def test_several_targets(tmp_path):
    """A dict target of three tensors, two holding the batch on dim 0 and
    one (with the tokens) on dim 1: a target port per tensor leaf with its
    batch dim, and train_step, grad_step + apply and eval_step each take
    them all (verify runs the three)."""
    spec = os.path.join(REAL, "several_targets.py")
    out = tmp_path / "several_targets.tstep"
    run("export", spec, "--out", out, "--grads")
    p = run("verify", out, "--threads", "1")
    assert p.stdout.strip().splitlines()[-1] == "verify: ok", p.stdout
    assert "grad+apply state mix.weight" in p.stdout  # the split steps ran
    for fn in ("train_step", "grad_step", "eval_step"):
        data = [(p["name"], p.get("index"), p.get("batch_dim", 0)) for p in _ports(out, fn)
                if p["role"] == "target"]
        assert data == [("target/tags", 0, 1), ("target/topic", 1, 0),
                        ("target/length", 2, 0)], (fn, data)
    # Fashion-MNIST's fields fit none of it: `train --data` names the first
    # port that does not fit, its field and both types.
    p = run("train", out, "--data", "fashion-mnist", "--max-batches", 1, check=False)
    assert p.returncode != 0
    assert ("input port 'ids' (int64[7, 5]) takes int64[7] a sample, but the data's field x: "
            "float32[28, 28] (28x28 images with int64 labels): the dtypes differ") in p.stderr, p.stderr


def test_vae_returns_its_tuple(tmp_path):
    out, text = _export_verify(tmp_path, os.path.join(ROOT, "examples", "vae", "spec.py"))
    assert _eval_outputs(out) == ["output/0", "output/1", "output/2"]


def test_pixel_shuffle_decompositions_match_torch():
    """1.13's capture decomposes pixel_(un)shuffle itself (2.x's table has
    them); random shapes, batched and not, against torch's own ops."""
    from trainstep.decompositions import _pixel_shuffle, _pixel_unshuffle
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        r = int(torch.randint(1, 4, (1,), generator=g))
        lead = torch.randint(1, 4, (int(torch.randint(0, 3, (1,), generator=g)),), generator=g)
        c, h, w = (int(v) for v in torch.randint(1, 5, (3,), generator=g))
        x = torch.randn(*lead.tolist(), c * r * r, h, w, generator=g)
        assert torch.equal(_pixel_shuffle(x, r), torch.pixel_shuffle(x, r))
        y = torch.pixel_shuffle(x, r)
        assert torch.equal(_pixel_unshuffle(y, r), torch.pixel_unshuffle(y, r))


def _cases(g, n=6):
    """Random shapes with exact zeros and ties sprinkled in."""
    for _ in range(n):
        shape = torch.randint(1, 5, (int(torch.randint(1, 4, (1,), generator=g)),),
                              generator=g).tolist()
        x = torch.randn(*shape, generator=g) * 3
        x.view(-1)[::3] = 0.0
        yield x, torch.randn(*shape, generator=g)


A = torch.ops.aten
# Each activation op, forward and backward, through the decomposition the
# capture uses for it (ours where the torch's table has none, else torch's).
DECOMPOSED = [  # (torch op, extra args)
    (A.elu.default, (0.7, 1.2, 0.9)),
    (A.leaky_relu.default, (0.1,)),
    (A.hardtanh.default, (-0.5, 0.5)),
    (A.softplus.default, (2.0, 5.0)),
    (A.mish.default, ()),
    (A.celu.default, (1.3,)),
    (A.sgn.default, ()),
]
BACKWARD = [  # (torch op, extra args after (grad, x))
    (A.leaky_relu_backward.default, (0.1, False)),
    (A.hardtanh_backward.default, (-0.5, 0.5)),
    (A.softplus_backward.default, (2.0, 5.0)),
    (A.mish_backward.default, ()),
]


def _decomposed(op):
    from trainstep.decompositions import decomposition_table
    table = decomposition_table()
    assert op in table, f"{op} has no decomposition: the runtime cannot run it whole"
    return table[op]


@pytest.mark.parametrize("op,args", DECOMPOSED, ids=[str(c[0]) for c in DECOMPOSED])
def test_activation_decompositions_match_torch(op, args):
    g = torch.Generator().manual_seed(1)
    for x, _ in _cases(g):
        torch.testing.assert_close(_decomposed(op)(x, *args), op(x, *args), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op,args", BACKWARD, ids=[str(c[0]) for c in BACKWARD])
def test_activation_backward_decompositions_match_torch(op, args):
    g = torch.Generator().manual_seed(2)
    for x, grad in _cases(g):
        torch.testing.assert_close(_decomposed(op)(grad, x, *args), op(grad, x, *args),
                                   rtol=1e-6, atol=1e-6)


def test_elu_backward_matches_torch():
    """From the input, and (in-place ELU) from the result."""
    g = torch.Generator().manual_seed(3)
    for x, grad in _cases(g):
        y = torch.nn.functional.elu(x, 0.7)
        for args in [(0.7, 1.2, 0.9, False, x), (0.7, 1.0, 1.0, True, y)]:
            torch.testing.assert_close(_decomposed(A.elu_backward.default)(grad, *args),
                                       A.elu_backward.default(grad, *args))


@pytest.mark.skipif(not hasattr(A, "prelu_backward"), reason="2.x decomposes prelu itself")
def test_prelu_decomposition_matches_torch():
    from trainstep import decompositions
    g = torch.Generator().manual_seed(4)
    for shape, wn in [((5, 3), 3), ((2, 4, 3, 3), 4), ((2, 4, 3), 1), ((7,), 1)]:
        x, grad = torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)
        w = torch.rand(wn, generator=g)
        torch.testing.assert_close(decompositions._prelu(x, w), A.prelu.default(x, w))
        for got, want in zip(decompositions._prelu_backward(grad, x, w),
                              A.prelu_backward.default(grad, x, w)):
            torch.testing.assert_close(got, want)


def _constant_dims(y):
    return [d for d in range(y.dim()) if bool((y == y.select(d, 0).unsqueeze(d)).all())]


@pytest.mark.parametrize("name,shape", [
    ("dropout1d", (5, 6, 7)), ("dropout1d", (6, 7)), ("dropout2d", (5, 6, 7, 8)),
    ("dropout2d", (5, 6, 7)), ("dropout3d", (4, 5, 3, 3, 3)), ("dropout3d", (5, 3, 3, 3)),
    ("dropout2d", (6, 64)), ("dropout2d", (3, 4, 5, 6, 7)), ("dropout3d", (6, 4)),
    ("feature_alpha_dropout", (5, 6, 7, 8)), ("feature_alpha_dropout", (6, 64))])
def test_channel_dropout_masks_what_torch_masks(name, shape):
    """The stream's channel dropout zeroes the same kind of slice as torch's
    (whole channels; unbatched inputs read as torch reads them): the dims
    along which the output is constant on a ones input agree."""
    import warnings
    import torch.nn.functional as F
    from trainstep import rng
    x = torch.ones(shape)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dropout2d's 3-d input warning
        want = _constant_dims(getattr(F, name)(x, 0.5, True))
        with rng.stream(torch.tensor(0), torch.tensor(0)):
            got = _constant_dims(getattr(F, name)(x, 0.5, True))
    assert got == want


def test_alpha_dropout_is_torchs_affine_map():
    """Kept units map to a*x + b and dropped ones to one constant: a, b and
    the constant fitted from torch's own output match ours."""
    import torch.nn.functional as F
    from trainstep import rng
    x = torch.randn(4000, generator=torch.Generator().manual_seed(5))

    def fit(y):
        dropped = torch.mode(y).values  # the one repeated value
        kept = y != dropped
        a = torch.linalg.lstsq(torch.stack([x[kept], torch.ones(int(kept.sum()))], 1),
                               y[kept].unsqueeze(1)).solution.flatten()
        return torch.stack([a[0], a[1], dropped])

    torch.manual_seed(0)
    want = fit(F.alpha_dropout(x, 0.3, True))
    with rng.stream(torch.tensor(0), torch.tensor(0)):
        got = fit(F.alpha_dropout(x, 0.3, True))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", [A.var_mean.correction, A.var.correction], ids=str)
def test_variance_decompositions_match_torch(op):
    """GroupNorm on 2.x and torch.var reach these (2.x's own decomposition
    lowers to prims.var, which the runtime does not take)."""
    g = torch.Generator().manual_seed(4)
    for x, _ in _cases(g, 10):
        for dim in (None, [0], [x.dim() - 1], list(range(x.dim()))):
            for correction in (0, 1):
                for keepdim in (False, True):
                    got = _decomposed(op)(x, dim, correction=correction, keepdim=keepdim)
                    want = op(x, dim, correction=correction, keepdim=keepdim)
                    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_vae_samples_in_eval_from_the_eval_stream(tmp_path):
    """pytorch/examples' VAE draws randn_like in eval mode too: its eval step
    gets the RNG inputs and keys from rng.EVAL_KEY_BASE up (never a training
    step's draws); a model that draws nothing in eval gets no RNG inputs."""
    from trainstep import rng, safetensors_io
    out, _ = _export_verify(tmp_path, os.path.join(ROOT, "examples", "vae", "spec.py"))
    _, meta = safetensors_io.load(str(out))
    fns = json.loads(meta["program"])["functions"]
    roles = [p["role"] for p in fns["eval_step"]["inputs"]]
    assert "rng_seed" in roles and "rng_offset" in roles
    keys = [n["attrs"]["key"] for n in fns["eval_step"]["nodes"] if n["op"].startswith("trainstep.philox")]
    assert keys and min(keys) >= rng.EVAL_KEY_BASE
    out2, _ = _export_verify(tmp_path, os.path.join(REAL, "super_resolution.py"))
    _, meta = safetensors_io.load(str(out2))
    roles = [p["role"] for p in json.loads(meta["program"])["functions"]["eval_step"]["inputs"]]
    assert "rng_seed" not in roles and "rng_offset" not in roles


def test_select_scatter_decomposition_matches_torch():
    """select's backward on 1.13 (rnn_last_step's output[:, -1, :])."""
    g = torch.Generator().manual_seed(5)
    for x, _ in _cases(g, 10):
        for dim in range(-x.dim(), x.dim()):
            for index in (0, -1, x.shape[dim] // 2):
                src = torch.randn(x.select(dim, index).shape, generator=g)
                torch.testing.assert_close(_decomposed(A.select_scatter.default)(x, src, dim, index),
                                           A.select_scatter.default(x, src, dim, index))


def test_strided_reads_of_transposed_values_run_as_gathers():
    """views.densify: as_strided over a non-contiguous value (what 1.13's
    functionalize leaves for a slice of a transposed tensor) becomes reads
    of its rebuilt storage; random shapes, permutations and slices."""
    from trainstep import views
    from trainstep.compat import make_fx
    g = torch.Generator().manual_seed(6)
    for _ in range(20):
        shape = torch.randint(1, 5, (3,), generator=g).tolist()
        perm = torch.randperm(3, generator=g).tolist()
        x = torch.randn(*shape, generator=g)
        y = x.permute(*perm)
        size = [int(torch.randint(1, d + 1, (1,), generator=g)) for d in y.shape]
        start = [int(torch.randint(0, d - s + 1, (1,), generator=g)) for d, s in zip(y.shape, size)]
        off = y.storage_offset() + sum(a * s for a, s in zip(start, y.stride()))

        def fn(t):
            return torch.ops.aten.as_strided.default(t.permute(*perm), size, y.stride(), off) * 2
        gm = make_fx(fn)(x)
        views.densify(gm, [x])
        # every as_strided left reads a contiguous value from its start
        reads = {n for n in gm.graph.nodes if n.target is torch.ops.aten.as_strided.default}
        for _, (_, _, offset, _, contiguous) in views._inputs_of(gm, reads, [x]).items():
            assert contiguous and offset == 0, gm.graph
        torch.testing.assert_close(gm(x), fn(x), rtol=0, atol=0)


@pytest.mark.parametrize("op", [A.triu.default, A.tril.default], ids=str)
def test_band_decompositions_match_torch(op):
    """Causal masks: torch.ones(T, T).triu(1), tril(); bool and float,
    batched, every diagonal that matters."""
    g = torch.Generator().manual_seed(7)
    for x, _ in _cases(g, 10):
        x = x.reshape(1, *x.shape) if x.dim() < 2 else x
        for d in range(-x.shape[-2] - 1, x.shape[-1] + 2):
            for t in (x, x > 0):
                assert torch.equal(_decomposed(op)(t, d), op(t, d))


def test_ones_decomposition_matches_torch():
    for size, dtype in [([3, 4], None), ([2], torch.float64), ([0, 2], torch.int64),
                        ([2, 2], torch.bool)]:
        got = _decomposed(A.ones.default)(size, dtype=dtype)
        want = A.ones.default(size, dtype=dtype)
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_fill_decomposition_matches_torch():
    g = torch.Generator().manual_seed(8)
    for x, _ in _cases(g, 6):
        for v in (torch.tensor(3.5), torch.tensor(2), torch.tensor(True)):
            got = _decomposed(A.fill.Tensor)(x, v)
            want = A.fill.Tensor(x, v)
            assert got.dtype == want.dtype and torch.equal(got, want)


def test_float64_model_traces_node_by_node(tmp_path):
    """verify --trace binds the float64 lr port of a float64 model."""
    out = tmp_path / "d.tstep"
    run("export", os.path.join(REAL, "double_lstm.py"), "--out", out, "--trace-values",
        "--golden-steps", 1, "--calibration-rounds", 0)
    p = run("verify", out, "--trace", "--threads", "1")
    assert "trace: all" in p.stdout and p.stdout.strip().endswith("verify: ok"), p.stdout


def test_roll_decomposition_matches_torch():
    """Swin's shifted windows: several dims, negative and oversized shifts,
    no dims (the flattened tensor)."""
    g = torch.Generator().manual_seed(9)
    for x, _ in _cases(g, 10):
        for dims in ([], [0], [x.dim() - 1], list(range(x.dim()))):
            shifts = [int(torch.randint(-7, 8, (1,), generator=g)) for _ in (dims or [0])]
            got = _decomposed(A.roll.default)(x, shifts, dims)
            assert torch.equal(got, A.roll.default(x, shifts, dims)), (x.shape, shifts, dims)


def test_index_decomposition_matches_torch():
    """x[idx], x[:, idx], x[i, j] with broadcast index tensors (Swin's
    relative position table), negative indices included."""
    g = torch.Generator().manual_seed(10)
    for _ in range(20):
        x = torch.randn(*torch.randint(2, 5, (3,), generator=g).tolist(), generator=g)
        for first in (0, 1):
            for count in (1, 2):
                if first + count > x.dim():
                    continue
                dims = x.shape[first:first + count]
                idx = [torch.randint(-d, d, (3, 1) if k == 0 else (1, 2), generator=g)
                       for k, d in enumerate(dims)]
                if count == 1:
                    idx = [idx[0].reshape(-1)]
                indices = [None] * first + idx
                got = _decomposed(A.index.Tensor)(x, indices)
                assert torch.equal(got, A.index.Tensor(x, indices)), (x.shape, first, count)


def test_index_put_decomposition_matches_torch():
    """x[i, j] = v and x[:, i] += v: index tensors on adjacent dims,
    broadcast against each other, negative indices, values broadcast to the
    indexed shape; duplicates only with accumulate (torch leaves their order
    unspecified otherwise). One 1-d index on dim 0 with full values is the
    runtime's own op, which the decomposition hands back."""
    g = torch.Generator().manual_seed(12)
    index_put = _decomposed(A.index_put.default)
    checked = 0
    for _ in range(30):
        x = torch.randn(*torch.randint(2, 5, (3,), generator=g).tolist(), generator=g)
        for first in (0, 1):
            for count in (1, 2):
                if first + count > x.dim():
                    continue
                dims = x.shape[first:first + count]
                for accumulate in (False, True):
                    n = int(torch.randint(1, min(dims) + 1, (1,), generator=g))
                    if accumulate:
                        idx = [torch.randint(-d, d, (n,), generator=g) for d in dims]
                    else:  # distinct positions: one permutation per dim
                        idx = [torch.randperm(d, generator=g)[:n] - d * (k % 2)
                               for k, d in enumerate(dims)]
                    indices = [None] * first + idx
                    full = A.index.Tensor(x, indices).shape
                    for values in (torch.randn(full, generator=g),
                                   torch.randn(full[-1:], generator=g), torch.tensor(2.5)):
                        got = index_put(x, indices, values, accumulate)
                        if got is NotImplemented:
                            assert first == 0 and count == 1 and values.shape == full
                            continue
                        want = A.index_put.default(x, indices, values, accumulate)
                        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
                        checked += 1
    assert checked > 100


# Index tensors separated by a slice, on rank-3 and rank-4 x.
NON_ADJACENT = [(3, (0, 2)), (4, (0, 2)), (4, (0, 3)), (4, (1, 3)), (4, (0, 1, 3))]


def _non_adjacent(g, distinct):
    """(x, indices) with index tensors on NON_ADJACENT's dims: (a, 1) against
    (1, b) when two (else 1-d of one length), some negative, a trailing None
    half the time; distinct positions unless asked for repeats."""
    for rank, dims in NON_ADJACENT:
        x = torch.randn(*torch.randint(2, 5, (rank,), generator=g).tolist(), generator=g)
        sizes = [x.shape[d] for d in dims]
        n = int(torch.randint(1, min(sizes) + 1, (1,), generator=g))
        shapes = [(n, 1), (1, n)] if len(dims) == 2 else [(n,)] * len(dims)
        idx = []
        for k, (d, shape) in enumerate(zip(sizes, shapes)):
            if distinct and (k == 0 or len(dims) == 2):
                t = torch.randperm(d, generator=g)[:n].reshape(shape)
            else:
                t = torch.randint(0, d, shape, generator=g)
            idx.append(t - d * (torch.rand(shape, generator=g) < 0.5))
        indices = [None] * rank
        for d, t in zip(dims, idx):
            indices[d] = t
        trail = bool(torch.rand((), generator=g) < 0.5) and dims[-1] < rank - 1
        yield x, indices[:dims[-1] + 1 + trail]


def test_index_decomposition_of_non_adjacent_indices_matches_torch():
    """x[i, :, j]: torch puts the broadcast index dims first."""
    g = torch.Generator().manual_seed(13)
    index = _decomposed(A.index.Tensor)
    for _ in range(10):
        for x, indices in _non_adjacent(g, distinct=False):
            got = index(x, indices)
            assert torch.equal(got, A.index.Tensor(x, indices)), (x.shape, indices)


def test_index_put_decomposition_of_non_adjacent_indices_matches_torch():
    """x[i, :, j] = v and += v: values of x[indices]'s full shape, of its
    last dim, 0-d; duplicates only with accumulate."""
    g = torch.Generator().manual_seed(14)
    index_put = _decomposed(A.index_put.default)
    for _ in range(10):
        for accumulate in (False, True):
            for x, indices in _non_adjacent(g, distinct=not accumulate):
                full = A.index.Tensor(x, indices).shape
                for values in (torch.randn(full, generator=g),
                               torch.randn(full[-1:], generator=g), torch.tensor(-1.5)):
                    got = index_put(x, indices, values, accumulate)
                    want = A.index_put.default(x, indices, values, accumulate)
                    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_index_put_decomposition_of_bool_masks_matches_torch():
    """x[mask] = v, x[:, mask] += v: a where() over x when the values do not
    depend on how many elements the mask selects (0-d, one element, the dims
    after the mask's, with a size-1 dim for the mask's count); a uint8 mask
    writes as the bool one. Values sized by that count, a mask with another
    index and a mask read stay whole (data-dependent)."""
    g = torch.Generator().manual_seed(15)
    index_put = _decomposed(A.index_put.default)
    for _ in range(20):
        x = torch.randn(*torch.randint(1, 5, (int(torch.randint(2, 5, (1,), generator=g)),),
                                       generator=g).tolist(), generator=g)
        first = int(torch.randint(0, 2, (1,), generator=g))
        m = int(torch.randint(1, x.dim() - first + 1, (1,), generator=g))
        mask = torch.rand(x.shape[first:first + m], generator=g) < 0.5
        lead, rest = x.shape[:first], x.shape[first + m:]
        indices = [None] * first + [mask]
        for values in (torch.tensor(0.5), torch.randn(1, generator=g), torch.randn(rest, generator=g),
                       torch.randn(rest[-1:], generator=g), torch.randn(*lead, 1, *rest, generator=g)):
            for accumulate in (False, True):
                want = A.index_put.default(x, indices, values, accumulate)
                torch.testing.assert_close(index_put(x, indices, values, accumulate), want)
                uint8 = [None] * first + [mask.to(torch.uint8)]
                torch.testing.assert_close(index_put(x, uint8, values, accumulate), want)
        count = int(mask.sum())
        if count != 1:  # one element: values of shape [1, *rest] are static
            values = torch.randn(*lead, count, *rest, generator=g)
            assert index_put(x, indices, values, False) is NotImplemented
        assert _decomposed(A.index.Tensor)(x, indices) is NotImplemented
        if x.dim() > first + m:
            other = indices + [torch.zeros(1, dtype=torch.long)]
            assert index_put(x, other, torch.tensor(1.0), False) is NotImplemented


def test_index_patterns_verify(tmp_path):
    """A gather through index tensors separated by a slice (its backward a
    non-adjacent index_put), bool-mask writes, and a non-adjacent write
    (patches.setitem on 1.13), end to end."""
    _export_verify(tmp_path, os.path.join(REAL, "index_patterns.py"))


def test_as_strided_scatter_decomposition_matches_torch():
    g = torch.Generator().manual_seed(11)
    for _ in range(20):
        x = torch.randn(*torch.randint(1, 5, (3,), generator=g).tolist(), generator=g)
        y = x.permute(*torch.randperm(3, generator=g).tolist())  # a strided view of x's storage
        size = [int(torch.randint(1, d + 1, (1,), generator=g)) for d in y.shape]
        src = torch.randn(size, generator=g)
        got = _decomposed(A.as_strided_scatter.default)(x, src, size, y.stride(), 0)
        assert torch.equal(got, A.as_strided_scatter.default(x, src, size, y.stride(), 0))


def test_zero_and_new_empty():
    """zero_ gives zeros; new_empty only its shape and dtype (its values are
    unspecified: ours are zeros, 2.x's table has its own entry)."""
    x = torch.randn(3, 4)
    assert torch.equal(_decomposed(A.zero.default)(x), torch.zeros(3, 4))
    got = _decomposed(A.new_empty.default)(x, [2, 5], dtype=torch.float64)
    assert got.dtype == torch.float64 and got.shape == (2, 5)


def test_sequence_first_lm_records_its_batch_dims(tmp_path):
    """seq_first_lm declares batch_dims=1: the artifact's batch is 8 (not the
    sequence length 16), the input and target ports say batch_dim 1, and the
    eval step's per-sample loss has one entry per sequence."""
    from trainstep import safetensors_io
    out, text = _export_verify(tmp_path, os.path.join(REAL, "seq_first_lm.py"))
    tensors, meta = safetensors_io.load(str(out))
    program = json.loads(meta["program"])
    assert program["batch_size"] == 8
    assert list(tensors["golden/eval/sample_loss"].shape) == [8]
    ports = {p["role"]: p for p in program["functions"]["train_step"]["inputs"]}
    assert ports["input"]["batch_dim"] == 1 and ports["target"]["batch_dim"] == 1
    assert ports["input"]["shape"] == [16, 8]
    assert "eval sample_loss" in text
