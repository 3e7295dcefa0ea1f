"""trainstep under Slurm, for real: a one-node cluster (slurm_cluster.py)
started for this module and stopped after it. `srun` launches the ranks
as `mpirun` does, to the same bytes; the job script people copy
(examples/slurm/train.sbatch) is preempted mid-run, requeues itself and
ends where an uninterrupted run ends; a rank killed under srun ends the
job, named."""
import os
import re
import signal
import subprocess
import time

import pytest

import slurm_cluster
from conftest import BIN, ROOT
from test_distributed import mpi_env, mpirun, signal_rank

pytestmark = [pytest.mark.runtime,
              pytest.mark.skipif(slurm_cluster.available() is not None,
                                 reason=str(slurm_cluster.available()))]

SCRIPT = os.path.join(ROOT, "examples", "slurm", "train.sbatch")
COMMON = ["--threads", 1, "--seed", 3]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = slurm_cluster.Cluster(tmp_path_factory.mktemp("slurm")).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def mnist(mnist_adadelta):
    return mnist_adadelta  # exported without --grads: the ranks' steps are cut from train_step


def srun(cluster, n, *args, check=True, timeout=300):
    cmd = ["srun", "--mpi=pmix", "-n", str(n), BIN, *map(str, args)]
    env = dict(mpi_env(), SLURM_CONF=cluster.conf)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
                             f"\n{cluster.logs()}")
    return p


def test_srun_trains_as_mpirun_does(cluster, mnist, small_data, tmp_path):
    """srun -n 2 starts the ranks through PMIx; the run is mpirun -np 2's,
    byte for byte."""
    data = ["--data", f"idx:{small_data}", *COMMON, "--epochs", 2]
    by_srun, by_mpirun = tmp_path / "srun.ckpt", tmp_path / "mpirun.ckpt"
    p = srun(cluster, 2, "train", mnist, *data, "--distributed", "mpi", "--save", by_srun)
    assert "data-parallel over 2 ranks" in p.stdout, p.stdout
    mpirun(2, "train", mnist, *data, "--distributed", "mpi", "--save", by_mpirun)
    assert by_srun.read_bytes() == by_mpirun.read_bytes()


def _wait_for(what, test, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = test()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_preempted_job_requeues_itself_and_ends_as_an_uninterrupted_run(
        cluster, mnist, small_data, tmp_path):
    """The job script gets SIGTERM as Slurm sends it before a time limit
    (--signal=B:TERM@N) or at preemption: scancel --signal=TERM --batch.
    Its ranks checkpoint and exit 143, it requeues itself, and the second
    start resumes: the final checkpoint is an uninterrupted run's, byte for
    byte. (Slurm holds a requeued job back ~2 minutes; the test releases
    it at once with scontrol update StartTime=now.)"""
    save = tmp_path / "job" / "m.ckpt"
    env = cluster.env(ART=str(mnist), DATA=f"idx:{small_data}", SAVE=str(save), EPOCHS="12",
                      TRAINSTEP=BIN, TRAINSTEP_PYTHON=mpi_env()["TRAINSTEP_PYTHON"])
    p = subprocess.run(["sbatch", "--parsable", f"--chdir={tmp_path}", SCRIPT,
                        *map(str, COMMON)], capture_output=True, text=True, env=env, check=True)
    job = p.stdout.strip().split(";")[0]
    out = tmp_path / f"trainstep-{job}.out"
    log = lambda: out.read_text() if out.exists() else ""  # noqa: E731
    ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")

    def running(what, test):
        def check():
            if cluster.job(job).get("JobState") in ended:
                raise AssertionError(f"the job ended before {what}:\n{log()}")
            return test()
        return _wait_for(what, check)
    running("the first epoch", lambda: re.search(r"^epoch 1:", log(), re.M))
    subprocess.run(["scancel", "--signal=TERM", "--batch", job], env=env, check=True)
    # Requeued: COMPLETING while the first start winds down, then PENDING.
    _wait_for("the requeue", lambda: (lambda j: j.get("Restarts") == "1" and
                                      j.get("JobState") == "PENDING")(cluster.job(job)))
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], env=env, check=True)
    _wait_for("the job's end", lambda: cluster.job(job).get("JobState") in ended, timeout=300)
    text = log()
    assert cluster.job(job)["JobState"] == "COMPLETED", text + cluster.logs()
    stop = re.search(r"interrupted by SIGTERM after step (\d+); checkpoint: (\S+)", text)
    assert stop and 0 < int(stop.group(1)) < 60, text  # 12 epochs of 5 steps
    assert "start 2 of job" in text, text

    straight = tmp_path / "straight.ckpt"
    srun(cluster, 2, "train", mnist, "--data", f"idx:{small_data}", *COMMON, "--epochs", 12,
         "--distributed", "mpi", "--save", straight)
    assert save.read_bytes() == straight.read_bytes()


def test_a_rank_killed_under_srun_ends_the_job_naming_it(cluster, mnist, small_data):
    """SIGKILL to rank 1 mid-run: srun ends the job step at once, naming
    the task, well inside the collective timeout (4 s here)."""
    cmd = ["srun", "--mpi=pmix", "-n", "2", BIN, "train", str(mnist), "--data",
           f"idx:{small_data}", *map(str, COMMON), "--epochs", "50", "--distributed", "mpi",
           "--collective-timeout", "4"]
    env = cluster.env(TRAINSTEP_PYTHON=mpi_env()["TRAINSTEP_PYTHON"])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        p.stdout.readline()  # "data-parallel over 2 ranks": both are in MPI
        pid = _wait_for("rank 1", lambda: _rank_pid(1))
        time.sleep(0.5)  # into the steps
    except BaseException:
        p.kill()
        p.communicate()
        raise
    out, err, took = signal_rank(p, pid, signal.SIGKILL)
    assert p.returncode != 0, (out, err)
    assert took < 4 + 10, took
    assert re.search(r"task 1: Killed", err), err


def _rank_pid(rank):
    """The pid of the trainstep process running `rank` of a job step."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if argv0.endswith(b"trainstep") and env.get(b"SLURM_PROCID") == str(rank).encode() \
                and b"SLURM_STEP_ID" in env:
            return int(d)
    return None


def test_the_docs_show_the_job_script_as_it_is():
    with open(os.path.join(ROOT, "docs", "distributed.md")) as f:
        docs = f.read()
    with open(SCRIPT) as f:
        assert "```bash\n" + f.read() + "```" in docs
