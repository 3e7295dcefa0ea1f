"""A one-node Slurm cluster for the tests: munged, slurmctld and slurmd
from Debian's packages (scripts/install-deps.sh), run as root out of a
folder of their own, on free ports, with 2 CPUs. Every command that talks to
it takes env() (SLURM_CONF). stop() ends the daemons and whatever jobs are
left."""
import os
import shutil
import signal
import socket
import subprocess
import time

DAEMONS = ("munged", "slurmctld", "slurmd")


def _which(name):
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def available():
    """Why a cluster cannot start here, or None."""
    if os.geteuid() != 0:
        return "the daemons run as root"
    missing = [n for n in (*DAEMONS, "srun", "sbatch", "scontrol") if not _which(n)]
    return f"no {', '.join(missing)} (scripts/install-deps.sh installs Slurm)" if missing else None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, folder):
        self.dir = str(folder)
        self.host = socket.gethostname().split(".")[0]
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.pids = {}

    def env(self, **extra):
        return dict(os.environ, SLURM_CONF=self.conf, **extra)

    def _path(self, *parts):
        return os.path.join(self.dir, *parts)

    def start(self):
        for d in ("state", "spool", "log"):
            os.makedirs(self._path(d), exist_ok=True)
        key = self._path("munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        sock = self._path("munge.sock")
        subprocess.run([_which("munged"), "--force", f"--key-file={key}", f"--socket={sock}",
                        f"--log-file={self._path('log', 'munged.log')}",
                        f"--pid-file={self._path('munged.pid')}",
                        f"--seed-file={self._path('munged.seed')}"], check=True)
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "ClusterName=trainstep-test",
                f"SlurmctldHost={self.host}",
                "SlurmUser=root", "SlurmdUser=root",
                "AuthType=auth/munge", f"AuthInfo=socket={sock}",
                f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
                f"StateSaveLocation={self._path('state')}",
                f"SlurmdSpoolDir={self._path('spool')}",
                f"SlurmctldPidFile={self._path('slurmctld.pid')}",
                f"SlurmdPidFile={self._path('slurmd.pid')}",
                f"SlurmctldLogFile={self._path('log', 'slurmctld.log')}",
                f"SlurmdLogFile={self._path('log', 'slurmd.log')}",
                # No cgroups in a container: processes are tracked by parent.
                "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
                # Debian's Open MPI is built with PMIx: srun starts its ranks.
                "MpiDefault=pmix",
                "SchedulerType=sched/backfill",
                "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
                "ReturnToService=2", "JobRequeue=1", "KillWait=30",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                f"NodeName={self.host} CPUs=2 State=UNKNOWN",
                f"PartitionName=test Nodes={self.host} Default=YES MaxTime=INFINITE State=UP",
                ""]))
        env = self.env()
        subprocess.run([_which("slurmctld"), "-i"], check=True, env=env)
        subprocess.run([_which("slurmd")], check=True, env=env)
        deadline = time.time() + 60
        while time.time() < deadline:
            p = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env)
            if p.returncode == 0 and p.stdout.strip() == "idle":
                return self
            time.sleep(0.5)
        raise RuntimeError(f"the test cluster did not come up: {self.logs()}")

    def logs(self):
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            try:
                with open(self._path("log", name)) as f:
                    out.append(f"{name}:\n" + "".join(f.readlines()[-20:]))
            except OSError:
                pass
        return "\n".join(out)

    def job(self, job_id):
        """`scontrol show job` as a dict (JobState, Restarts, ExitCode, ...)."""
        p = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], capture_output=True,
                           text=True, env=self.env())
        return dict(kv.split("=", 1) for kv in p.stdout.split() if "=" in kv)

    def stop(self):
        subprocess.run(["scancel", "--user=root"], capture_output=True, env=self.env())
        for name in reversed(DAEMONS):
            try:
                with open(self._path(f"{name}.pid")) as f:
                    pid = int(f.read().split()[0])
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError):
                continue
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.1)
