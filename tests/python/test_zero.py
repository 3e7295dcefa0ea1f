"""A sharded optimizer (`train --distributed mpi --shard-optimizer`, ZeRO
stage 1): each rank updates a share of the parameters and holds only their
optimizer state. The oracle is unsharded data-parallel training of the same
artifact on the same ranks: the two differ only in the order the ranks'
gradients are summed (a reduce-scatter against an all-reduce), so they must
agree within what reordering the same sums moves the parameters."""
import pytest
import torch

from conftest import run
from test_distributed import _max_diff, _params, _spec, mpirun, pytestmark  # noqa: F401

COMMON = ["--threads", 1, "--seed", 3]


SMALL_BUCKETS = ("--no-overlap", "--first-bucket-mb", 0.001, "--bucket-cap-mb", 0.01)


@pytest.mark.parametrize("spec,reduction,ranks,extra", [
    # dropout; each update reads its own gradient
    ("mnist_adamw.py", "reduce-scattered", 2, ()),
    ("mnist_adamw.py", "reduce-scattered", 4, ()),
    # a bucket or more per parameter, so some ranks update nothing in a
    # bucket; each collective run inside its wait
    ("mnist_adamw.py", "reduce-scattered", 4, SMALL_BUCKETS),
    # clipping reads every gradient; BatchNorm
    ("dp_split.py", "all-reduced, as the update of", 2, ()),
    ("dp_split.py", "all-reduced, as the update of", 4, ()),
])
def test_sharded_matches_unsharded_data_parallel(spec, reduction, ranks, extra, artifacts,
                                                  small_data, tmp_path):
    """Whole epochs (640 samples). The tolerance is 8x what summing the same
    samples in another order (one rank, --accumulate over the ranks'
    batches) moves the parameters from the unsharded run."""
    art = artifacts(spec[:-3], _spec(spec))
    data = ["--data", f"idx:{small_data}", *COMMON]
    plain, zero, acc = (tmp_path / f"{n}.ckpt" for n in ("plain", "zero", "acc"))
    mpirun(ranks, "train", art, *data, "--distributed", "mpi", "--save", plain)
    p = mpirun(ranks, "train", art, *data, "--distributed", "mpi", "--shard-optimizer", *extra,
               "--save", zero)
    assert "optimizer sharded (ZeRO-1): rank 0 updates" in p.stdout, p.stdout
    assert reduction in p.stdout, p.stdout
    run("train", art, *data, "--accumulate", ranks, "--save", acc)
    ref = _params(plain)[0]
    tol = 8 * max(_max_diff(_params(acc)[0], ref), 1e-7)
    assert _max_diff(_params(zero)[0], ref) <= tol, (_max_diff(_params(zero)[0], ref), tol)
    # The optimizer state too: rank 0 wrote every rank's share.
    opt_plain = torch.load(str(run_export(art, plain, tmp_path)), weights_only=False)
    opt_zero = torch.load(str(run_export(art, zero, tmp_path)), weights_only=False)
    assert opt_plain["optimizer"]["state"].keys() == opt_zero["optimizer"]["state"].keys()
    for k, st in opt_plain["optimizer"]["state"].items():
        for name, v in st.items():
            if torch.is_tensor(v) and v.is_floating_point() and v.dim() > 0:
                got = opt_zero["optimizer"]["state"][k][name]
                assert (got - v).abs().max().item() <= tol * 10, (k, name)


def run_export(art, ckpt, tmp_path):
    """export-checkpoint: the PyTorch file (model and optimizer state dicts)."""
    out = tmp_path / (ckpt.stem + ".pt")
    run("export-checkpoint", art, ckpt, "--out", out)
    return out


def test_sharded_checkpoints_resume_sharded_or_not_on_any_rank_count(artifacts, small_data,
                                                                    tmp_path):
    """Rank 0 writes the whole state, so the file is the unsharded one:
    resumed on 2 ranks sharded or not, it ends byte for byte where an
    uninterrupted unsharded run does (the sum of two is one sum in either
    order); it resumes on 1 rank and on 4 too; periodic checkpoints are
    gathered the same way."""
    art = artifacts("mnist_adamw", _spec("mnist_adamw.py"))
    data = ["--data", f"idx:{small_data}", *COMMON, "--max-batches", 8]
    ck = {n: tmp_path / f"{n}.ckpt" for n in ("full", "half", "plain", "zero", "one", "four")}
    mpirun(2, "train", art, *data, "--epochs", 2, "--distributed", "mpi", "--save", ck["full"])
    mpirun(2, "train", art, *data, "--epochs", 1, "--distributed", "mpi", "--shard-optimizer",
           "--save", ck["half"], "--checkpoint-every", 3)
    periodic = sorted(p.name for p in (tmp_path / "half.checkpoints").iterdir())
    assert periodic == ["step-0000000003.ckpt", "step-0000000006.ckpt"], periodic
    for name, extra in (("plain", ()), ("zero", ("--shard-optimizer",))):
        mpirun(2, "train", art, *data, "--epochs", 1, "--distributed", "mpi", *extra,
               "--resume", ck["half"], "--save", ck[name])
        assert ck[name].read_bytes() == ck["full"].read_bytes(), name
    run("train", art, *data, "--epochs", 1, "--resume", ck["half"], "--save", ck["one"])
    mpirun(4, "train", art, *data, "--epochs", 1, "--distributed", "mpi", "--shard-optimizer",
           "--resume", ck["half"], "--save", ck["four"])
    assert _params(ck["four"])[1]["world_size"] == "4"


def test_an_optimizer_traced_from_its_step_shards_by_whole_matrix(small_data, tmp_path):
    """Muon (Newton-Schulz on each whole matrix, momentum on the rest),
    traced from its own step(): 2 ranks sharded match 2 ranks unsharded
    byte for byte, a step at a time and with --accumulate 2."""
    art = tmp_path / "muon.tstep"
    run("export", _spec("traced_optim.py"), "--out", art, env={"TS_OPTIM": "Muon"})
    data = ["--data", f"idx:{small_data}", *COMMON, "--max-batches", 6]
    for extra in ((), ("--accumulate", 2)):
        a, b = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
        mpirun(2, "train", art, *data, *extra, "--distributed", "mpi", "--save", a)
        p = mpirun(2, "train", art, *data, *extra, "--distributed", "mpi", "--shard-optimizer",
                   "--save", b)
        assert "reduce-scattered" in p.stdout, p.stdout
        assert a.read_bytes() == b.read_bytes(), extra


def test_shard_optimizer_needs_data_parallel(artifacts):
    art = artifacts("mnist_adamw", _spec("mnist_adamw.py"))
    p = run("train", art, "--data", "synthetic", "--shard-optimizer", check=False)
    assert p.returncode != 0 and "--shard-optimizer requires --distributed" in p.stderr, p.stderr
