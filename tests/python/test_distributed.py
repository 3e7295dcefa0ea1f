"""Data-parallel training over MPI (`train --distributed mpi`), on loopback
with mpirun: N ranks x batch B against 1 rank x batch N*B, rank-keyed
dropout, checkpoints that move between rank counts, and the errors."""
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from conftest import BIN, SPECS, run



def _built_without_mpi():
    """A binary from cmake -DTRAINSTEP_WITH_MPI=OFF says so (and only it)."""
    p = subprocess.run(["mpirun", "--allow-run-as-root", "-np", "1", BIN, "train", "/nonexistent",
                        "--distributed", "mpi"], capture_output=True, text=True, timeout=60)
    return "built without MPI" in p.stderr


pytestmark = [
    pytest.mark.runtime, pytest.mark.asan,
    pytest.mark.skipif(shutil.which("mpirun") is None,
                       reason="no mpirun (scripts/install-deps.sh installs openmpi-bin)"),
    pytest.mark.skipif(shutil.which("mpirun") is not None and _built_without_mpi(),
                       reason="built with -DTRAINSTEP_WITH_MPI=OFF"),
]


def _spec(name):
    return os.path.join(SPECS, name)


def mpi_env():
    """The environment for ranks. Under `make test-asan`, without leak
    checks: Open MPI's plugins are unloaded by MPI_Finalize, so what they
    keep until exit is reported from unknown modules that no suppression
    can name. Every single-process test still checks for leaks."""
    env = dict(os.environ, TRAINSTEP_PYTHON=sys.executable)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"].replace("detect_leaks=1", "detect_leaks=0")
    return env


def mpirun(n, *args, check=True, timeout=300):
    """trainstep ARGS on n ranks of a local mpirun."""
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), BIN,
           *map(str, args)]
    env = mpi_env()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def _params(ckpt):
    from trainstep import checkpoint
    model, _, meta = checkpoint.load(str(ckpt))
    return model, meta


def _max_diff(a, b):
    return max((a[k] - b[k]).abs().max().item() for k in a)


@pytest.fixture(scope="module")
def accum(artifacts):
    return {b: artifacts(f"accum{b}", _spec(f"accum{b}.py")) for b in (16, 32, 64)}


COMMON = ["--threads", 1, "--seed", 3]


def test_ranks_times_batch_match_one_big_batch(accum, small_data, tmp_path):
    """SGD with momentum, no dropout or BatchNorm, 10 steps: 2 ranks x 32
    and 4 ranks x 16 against 1 rank x 64. Each global step covers the same
    64 samples (ranks take a stride of one shuffle, as DistributedSampler
    does), so only the order of the float32 sums differs. The tolerance
    is derived from that: the same 64 samples summed in another order on
    one rank (--accumulate over consecutive sub-batches) moves the
    parameters by d; the ranks may differ from the big batch by 8 d."""
    data = ["--data", f"idx:{small_data}", *COMMON]
    one = tmp_path / "one64.ckpt"
    run("train", accum[64], *data, "--save", one)
    ref, meta = _params(one)
    assert meta["step"] == "10"  # 640 samples / 64
    for ranks, batch in ((2, 32), (4, 16)):
        acc, par = tmp_path / f"acc{batch}.ckpt", tmp_path / f"par{ranks}.ckpt"
        run("train", accum[batch], *data, "--accumulate", ranks, "--save", acc)
        p = mpirun(ranks, "train", accum[batch], *data, "--distributed", "mpi", "--save", par)
        assert f"data-parallel over {ranks} ranks" in p.stdout, p.stdout
        got, meta = _params(par)
        assert meta["step"] == "10" and meta["world_size"] == str(ranks), meta
        reorder = _max_diff(_params(acc)[0], ref)
        tol = 8 * max(reorder, 1e-7)  # 1e-7: the parameters' float32 ulp, if d happens to be 0
        assert _max_diff(got, ref) <= tol, (ranks, _max_diff(got, ref), tol)
        # Not vacuous: one rank x `batch`, each batch its own step, ends elsewhere.
        alone = tmp_path / f"alone{batch}.ckpt"
        run("train", accum[batch], *data, "--save", alone)
        assert _max_diff(_params(alone)[0], ref) > 1e-3


def _equivalent(big, small, ranks, data, tmp_path, accumulate=1, extra=()):
    """Final parameters of 1 rank x `big` and of `ranks` ranks x `small`
    (each accumulating `accumulate` batches), and the summation-order
    tolerance: 8x what the same samples summed in another order on one
    rank (`small` x ranks*accumulate accumulated) moves them."""
    one, par, acc = (tmp_path / f"{n}.ckpt" for n in ("one", "par", "acc"))
    out1 = run("train", big, *data, *extra, "--save", one).stdout
    outn = mpirun(ranks, "train", small, *data, *extra, "--distributed", "mpi", "--accumulate",
                  accumulate, "--save", par).stdout
    run("train", small, *data, *extra, "--accumulate", ranks * accumulate, "--save", acc)
    ref = _params(one)[0]
    tol = 8 * max(_max_diff(_params(acc)[0], ref), 1e-7)
    return ref, _params(par)[0], tol, out1, outn


def test_accumulation_reduces_once_per_optimizer_step(accum, small_data, tmp_path):
    """2 ranks x 2 micro-batches of 16 = one step on 64 samples."""
    ref, got, tol, _, _ = _equivalent(accum[64], accum[16], 2, ["--data", f"idx:{small_data}",
                                      *COMMON], tmp_path, accumulate=2)
    assert _max_diff(got, ref) <= tol, (_max_diff(got, ref), tol)


def test_clipping_sees_the_averaged_gradient(artifacts, small_data, tmp_path):
    """Every step clips. Clipping each rank's gradient before averaging
    would end far from 1 rank x 64; clipping the average matches it."""
    small = artifacts("dp_clip", _spec("dp_clip.py"))
    big = artifacts("dp_clip64", _spec("dp_clip64.py"))
    ref, got, tol, _, _ = _equivalent(big, small, 2, ["--data", f"idx:{small_data}", *COMMON],
                                      tmp_path)
    assert _max_diff(got, ref) <= tol, (_max_diff(got, ref), tol)


def test_sharded_evaluation_counts_every_test_sample_once(accum, small_data, tmp_path):
    """300 test samples over 2 ranks (150 each, the last batch padded): the
    reduced loss and accuracy are the 1-rank run's, whose parameters agree."""
    _, _, _, out1, out2 = _equivalent(accum[64], accum[32], 2, ["--data", f"idx:{small_data}",
                                      *COMMON], tmp_path)
    pat = re.compile(r"test loss ([0-9.]+), test accuracy ([0-9.]+)%")
    (l1, a1), (l2, a2) = pat.search(out1).groups(), pat.search(out2).groups()
    assert a1 == a2 and abs(float(l1) - float(l2)) <= 1e-4, (out1, out2)


def test_only_rank_0_prints_and_writes(accum, small_data, tmp_path):
    ckpt_dir = tmp_path / "ckpts"
    p = mpirun(2, "train", accum[32], "--data", f"idx:{small_data}", *COMMON, "--distributed",
               "mpi", "--checkpoint-every", 5, "--checkpoint-dir", ckpt_dir)
    assert p.stdout.count("training accum32") == 1, p.stdout
    assert p.stdout.count("epoch 1: lr") == 1, p.stdout
    assert sorted(os.listdir(ckpt_dir)) == ["step-0000000005.ckpt", "step-0000000010.ckpt"]


def test_dropout_masks_differ_by_rank_and_repeat_by_seed(artifacts, tmp_path):
    """Every sample is the same image, so the ranks' batches are equal: were
    their masks equal too, two ranks would compute what one does. They
    differ (the RNG seed is keyed by rank), and a second run with the same
    seed and world size gives the same bits."""
    from test_features import repeated_sample_data
    data = str(tmp_path / "same")
    repeated_sample_data(data, 256)
    art = artifacts("dp_dropout", _spec("dp_dropout.py"))
    common = ["train", art, "--data", f"idx:{data}", *COMMON]
    one = tmp_path / "one.ckpt"
    run(*common, "--save", one)
    a, b = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
    mpirun(2, *common, "--distributed", "mpi", "--save", a)
    mpirun(2, *common, "--distributed", "mpi", "--save", b)
    pa, pb, p1 = _params(a)[0], _params(b)[0], _params(one)[0]
    for k in pa:
        assert torch.equal(pa[k], pb[k]), k
    assert _max_diff(pa, p1) > 1e-4


def test_a_checkpoint_from_2_ranks_resumes_on_1(accum, small_data, tmp_path):
    """Saved mid-epoch by 2 ranks x 32 (step 6: 384 samples of the epoch),
    resumed on 1 rank x 64: the data position is in samples, so it continues
    at batch 6 of 64 and ends where 1 rank x 64 straight through does."""
    data = ["--data", f"idx:{small_data}", *COMMON]
    one = tmp_path / "one64.ckpt"
    run("train", accum[64], *data, "--epochs", 2, "--save", one)
    ckpts = tmp_path / "ckpts"
    mpirun(2, "train", accum[32], *data, "--distributed", "mpi", "--checkpoint-every", 6,
           "--checkpoint-dir", ckpts)
    mid = ckpts / "step-0000000006.ckpt"
    _, meta = _params(mid)
    assert (meta["data_samples"], meta["data_position"], meta["world_size"]) == ("384", "6", "2")
    done = tmp_path / "resumed.ckpt"
    run("train", accum[64], *data, "--resume", mid, "--epochs", 2, "--save", done)
    got, meta = _params(done)
    ref, ref_meta = _params(one)
    assert meta["step"] == ref_meta["step"] == "20"
    acc = tmp_path / "acc.ckpt"  # the summation-order scale, as above
    run("train", accum[32], *data, "--epochs", 2, "--accumulate", 2, "--save", acc)
    tol = 8 * max(_max_diff(_params(acc)[0], ref), 1e-7)
    assert _max_diff(got, ref) <= tol, (_max_diff(got, ref), tol)


def test_a_position_the_ranks_cannot_split_is_refused(accum, small_data, tmp_path):
    """Saved by 1 rank x 64 after 6 steps, 384 samples into the epoch: 4
    ranks x 64 take 256 samples a step, so 384 is no step boundary for them."""
    ckpts = tmp_path / "ckpts"
    run("train", accum[64], "--data", f"idx:{small_data}", *COMMON, "--checkpoint-every", 6,
        "--checkpoint-dir", ckpts)
    p = mpirun(4, "train", accum[64], "--data", f"idx:{small_data}", *COMMON, "--distributed",
               "mpi", "--resume", ckpts / "step-0000000006.ckpt", check=False)
    assert p.returncode != 0
    assert "384 samples into an epoch, not a whole number of batches of 64 on 4 rank(s)" in p.stderr, p.stderr


@pytest.mark.parametrize("spec,optim", [("groups_sgd.py", None), ("dp_split.py", None),
                                         ("traced_optim.py", "Muon")])
def test_an_artifact_without_grads_trains_as_the_grads_export_does(spec, optim, small_data,
                                                                    tmp_path):
    """Data-parallel and accumulation on an artifact exported without
    --grads: grad_step and apply_step are cut from its train_step. The
    oracle is the same spec exported with --grads (its own traced grad_step
    and apply_step): the checkpoints agree byte for byte. The specs put
    dropout, param groups, clipping and an optimizer
    traced from its own step() (Muon) across the cut; a BatchNorm's
    running stats and AdamW with AMSGrad too."""
    env = {"TS_OPTIM": optim} if optim else None
    plain, grads = tmp_path / "plain.tstep", tmp_path / "grads.tstep"
    run("export", _spec(spec), "--out", plain, env=env)
    run("export", _spec(spec), "--out", grads, "--grads", env=env)
    assert "function grad_step" not in run("inspect", plain).stdout
    data = ["--data", f"idx:{small_data}", *COMMON, "--max-batches", 6]
    for how, launch in (("mpi", lambda *a: mpirun(2, *a, "--distributed", "mpi")),
                        ("accumulate", lambda *a: run(*a, "--accumulate", 3))):
        ckpts = []
        for art in (plain, grads):
            ckpts.append(tmp_path / f"{how}-{art.stem}.ckpt")
            launch("train", art, *data, "--save", ckpts[-1])
        assert ckpts[0].read_bytes() == ckpts[1].read_bytes(), (spec, how)


def signal_rank(launcher, pid, sig, timeout=60):
    """Sends `sig` to the rank with `pid` and waits for the job's launcher:
    (stdout, stderr, seconds it took to end). The launcher is killed if it
    outlives the timeout."""
    import time
    t0 = time.time()
    try:
        os.kill(pid, sig)
        out, err = launcher.communicate(timeout=timeout)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    return out, err, time.time() - t0


def _rank_pids(launcher_pid):
    """{rank: pid} of the trainstep processes mpirun `launcher_pid` started."""
    pids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        if ppid == launcher_pid and b"OMPI_COMM_WORLD_RANK" in env:
            pids[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(d)
    return pids


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
def test_a_dead_or_hung_rank_ends_the_run_and_it_resumes(accum, small_data, tmp_path, fault):
    """One of 2 ranks is killed (-9) or stopped mid-run. Killed: mpirun sees
    it and ends the job, naming the rank. Stopped (a hang mpirun cannot
    see): rank 0 fails after --collective-timeout, naming the collective,
    the step and the rank that did not answer. Either way the job exits
    non-zero within the timeout, and --resume auto then finishes the run."""
    import signal
    import time
    ckpts = tmp_path / "ckpts"
    args = ["train", accum[32], "--data", f"idx:{small_data}", *COMMON, "--epochs", 100,
            "--distributed", "mpi", "--collective-timeout", 4, "--checkpoint-every", 20,
            "--checkpoint-dir", ckpts]
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", BIN, *map(str, args)]
    env = mpi_env()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.time() + 120
        while not (ckpts.exists() and os.listdir(ckpts)) and time.time() < deadline:
            time.sleep(0.05)
        pids = _rank_pids(p.pid)
        assert set(pids) == {0, 1}, pids
    except BaseException:
        p.kill()
        p.communicate()
        raise
    out, err, took = signal_rank(p, pids[1], getattr(signal, fault))
    assert p.returncode != 0, (out, err)
    assert took < 4 + 10, took  # the timeout, plus MPI's teardown
    if fault == "SIGKILL":
        assert "process rank 1" in err and "signal 9" in err, err
    else:
        # Whichever collective rank 0 was in: a bucket's, or the loop's own.
        assert re.search(r"trainstep: rank 0 of 2: epoch \d+, step \d+: .+: no result within 4 s "
                         r"\(--collective-timeout\): rank 1 did not answer \(this is rank 0 of 2\)",
                         err), err
    newest = sorted(os.listdir(ckpts))[-1]
    epochs = int(_params(ckpts / newest)[1]["epoch"]) + 2
    done = mpirun(2, *[a if a != 100 else epochs for a in args], "--resume", "auto")
    assert f"resuming from {ckpts / newest}" in done.stderr, done.stderr
    assert f"epoch {epochs}: lr" in done.stdout, done.stdout


def test_three_ranks_stay_replicated(accum, small_data, tmp_path):
    """A rank count that is no power of two (MPI picks other reduction
    algorithms): after every epoch the trainer compares a hash of every
    rank's parameters and optimizer state, and fails the run on a
    difference. 640 samples keep 213 per rank: 13 steps of 3 x 16 an epoch."""
    ckpt = tmp_path / "three.ckpt"
    mpirun(3, "train", accum[16], "--data", f"idx:{small_data}", *COMMON, "--epochs", 2,
           "--distributed", "mpi", "--save", ckpt)
    meta = _params(ckpt)[1]
    assert (meta["step"], meta["world_size"]) == ("26", "3"), meta


def test_replicas_that_diverge_fail_the_run(accum, small_data):
    """Ranks run with different --lr (mpirun's MPMD form) update the same
    averaged gradient differently: the epoch's replica check stops it."""
    args = ["train", accum[32], "--data", f"idx:{small_data}", *COMMON, "--distributed", "mpi"]
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "1", BIN, *map(str, args),
           "--lr", "0.05", ":", "-np", "1", BIN, *map(str, args), "--lr", "0.1"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=mpi_env(), timeout=300)
    assert p.returncode != 0
    assert ("step 10: the ranks' parameters or optimizer state differ: the replicas diverged"
            in p.stderr), p.stderr


def test_token_file_ranks_see_disjoint_windows_covering_one_ranks_epoch(artifacts, tmp_path):
    """A token file (random windows, tokens:FILE:BLOCK) on 2 ranks x 8
    against 1 rank x 16: each global step reads the same 16 windows, the
    ranks taking alternate ones of the shuffle, so the parameters agree up
    to the order of the sums (the tolerance of _equivalent), and the epoch
    has as many steps."""
    big = artifacts("data_token_lm_grads16", _spec("data_token_lm_grads16.py"))
    small = artifacts("data_token_lm_grads8", _spec("data_token_lm_grads8.py"))
    import numpy as np
    np.random.default_rng(4).integers(0, 50, 1000).astype(np.uint16).tofile(tmp_path / "t.bin")
    data = ["--data", f"tokens:{tmp_path / 't.bin'}:6", *COMMON]
    ref, got, tol, out1, outn = _equivalent(big, small, 2, data, tmp_path)
    assert _max_diff(got, ref) <= tol, (_max_diff(got, ref), tol)
    assert _params(tmp_path / "par.ckpt")[1]["step"] == _params(tmp_path / "one.ckpt")[1]["step"]
