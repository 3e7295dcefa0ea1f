"""bench/peers: the same spec's training step under trainstep and its peers
(torch 2.x eager, torch.compile default and max-autotune-no-cudagraphs, and
for the MNIST CNN a JAX version), measured alternately in one run.

    peers.py --torch-python PY [--jax-python PY] [--models mnist,resnet,...]
             [--threads 1,2] [--steps N] [--rounds R]

A model is examples/MODEL/spec.py, else bench/peers/specs/MODEL.py: there,
torchvision's mobilenet_v3_small, efficientnet_b0 and resnet18 and timm's
convnext_atto (as "convnext"), at 64x64, which export under torch 2.x only.

Each Python peer is a worker process that compiles its step once, then times
N steps whenever asked; trainstep runs `trainstep bench` for N steps. Every
round times each peer once (median ms/step of its N steps), the order
rotating from round to round. A ratio is peer ms / trainstep ms in the same
round, median over rounds (above 1: trainstep is faster). Compile
time is apart: the first 3 calls' time less 3 steady steps (trainstep: its
load+compile). Writes the table to stdout and OUT/peers.md.
"""
import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from benchlib import BIN, ROOT, trainstep_bench, warm_heap_env  # noqa: E402

# The examples, then bench/peers/specs' models (cheaper steps first).
MODELS = ["mnist", "resnet", "mobilenet", "transformer", "lstm",
          "mobilenet_v3_small", "efficientnet_b0", "resnet18", "convnext"]
PEERS = ["eager", "compile", "max-autotune", "jax"]
WARMUP = 3
PROFILE_LINES = 14


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def spec_path(model):
    """The model's spec file: its example's, else one of bench/peers/specs
    (models that are benchmarks only, not examples)."""
    example = os.path.join(ROOT, "examples", model, "spec.py")
    if os.path.exists(example):
        return example
    own = os.path.join(HERE, "specs", f"{model}.py")
    if os.path.exists(own):
        return own
    raise RuntimeError(f"no spec: neither {example} nor {own}")


def export(model, out_dir, torch2_python):
    """The model's artifact, exported under torch 2.x, else under the system
    torch (1.13): the program is the same. Returns (path, note)."""
    spec = spec_path(model)
    art = os.path.join(out_dir, f"{model}.tstep")
    why = ""
    for py in (torch2_python, "/usr/bin/python3"):
        env = dict(os.environ, TRAINSTEP_PYTHON=py,
                   TRAINSTEP_PYTHONPATH=os.path.join(ROOT, "python"))
        p = subprocess.run([BIN, "export", spec, "--out", art, "--golden-steps", "1"],
                           capture_output=True, text=True, env=env)
        if p.returncode == 0:
            if py == torch2_python:
                return art, "exported under torch 2.x"
            return art, f"exported under /usr/bin/python3's torch (torch 2.x export failed: {why})"
        lines = (p.stderr + p.stdout).strip().splitlines()
        why = lines[-1].strip() if lines else f"exit {p.returncode}"
        log(f"{model}: export with {py} failed: {why}")
    raise RuntimeError(f"export failed: {why}")


class Worker:
    """One peer's process: started, then asked for N timed steps at a time."""

    def __init__(self, name, cmd, env, log_path):
        self.name, self.error, self.info = name, "", {}
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env, cwd=ROOT)
        self.buf = b""

    def read(self, timeout):
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer in {timeout:.0f} s")
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise RuntimeError(f"worker exited ({self.proc.wait()}); see {self.log.name}")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def start(self, timeout):
        try:
            self.info = self.read(timeout)
            self.error = self.info.get("error", "")
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
        if self.error:
            self.close()
        return not self.error

    def steps(self, n, timeout):
        self.proc.stdin.write(f"{n}\n".encode())
        self.proc.stdin.flush()
        ans = self.read(timeout)
        if "error" in ans:
            raise RuntimeError(ans["error"])
        return ans

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def worker_env(peer, threads, cache_dir):
    """The fairness settings (benchlib.py) and thread counts of one peer."""
    env = warm_heap_env()
    n = str(threads)
    env.update(OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, TORCHINDUCTOR_CACHE_DIR=cache_dir,
               PYTHONUNBUFFERED="1")
    if peer == "jax":
        # XLA:CPU sizes its intra-op pool by the CPUs it may run on (affinity,
        # set by taskset: pin()) and Eigen's by this flag; with one
        # thread Eigen's pool is switched off. --xla_cpu_ftz: flush-to-zero.
        flags = ["--xla_cpu_ftz=true"]
        if threads == 1:
            flags.append("--xla_cpu_multi_thread_eigen=false")
        env["XLA_FLAGS"] = " ".join(flags + [env.get("XLA_FLAGS", "")]).strip()
    return env


def pin(threads):
    """taskset's arguments that hold a process to `threads` CPUs, or none."""
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    if shutil.which("taskset") and len(cpus) < len(os.sched_getaffinity(0)):
        return ["taskset", "-c", ",".join(map(str, cpus))]
    return []


def measure(model, threads, art, a, logs):
    """One (model, threads) row: every peer alternately, `a.rounds` rounds."""
    spec = spec_path(model)
    peers = [p for p in a.peers if p != "jax" or model == "mnist"]
    workers, errors = {}, {}
    prefix = pin(threads) if a.pin_all else []  # JAX is pinned either way
    cache = tempfile.mkdtemp(prefix="inductor-", dir=a.out)  # cold compile for each row
    for p in peers:
        if p == "jax":
            if not a.jax_python:
                errors[p] = "no JAX environment"
                continue
            cmd = pin(threads) + [a.jax_python, os.path.join(HERE, "worker_jax.py"),
                                  "--threads", str(threads)]
        else:
            cmd = prefix + [a.torch_python, os.path.join(HERE, "worker_torch.py"), "--peer", p,
                            "--spec", spec, "--threads", str(threads)]
        log(f"{model} threads={threads}: starting {p}")
        w = Worker(p, cmd, worker_env(p, threads, os.path.join(cache, p)),
                   os.path.join(logs, f"{model}-t{threads}-{p}.log"))
        t0 = time.monotonic()
        if w.start(a.compile_timeout):
            workers[p] = w
            log(f"  ready in {time.monotonic() - t0:.1f} s: {w.info['note']}")
        else:
            errors[p] = w.error
            log(f"  {p} failed: {w.error}")
    ms = {p: [] for p in ["trainstep", *workers]}
    ts_load, problems = [], {}
    for r in range(a.rounds):
        order = list(ms)
        order = order[r % len(order):] + order[:r % len(order)]
        for p in order:
            time.sleep(0.05)  # let the last peer's spinning threads go idle
            if p == "trainstep":
                m, load_s, _ = trainstep_bench(art, a.steps, threads, warmup=WARMUP, prefix=prefix)
                ms[p].append(m)
                ts_load.append(load_s)
                continue
            if p in errors:
                continue
            try:
                ans = workers[p].steps(a.steps, a.step_timeout)
            except Exception as e:
                errors[p] = f"failed while timed: {e}"
                workers[p].close()
                continue
            ms[p].append(ans["ms"])
            if ans["problem"]:
                problems.setdefault(p, ans["problem"])
        log(f"  round {r + 1}: " + ", ".join(f"{p} {v[-1]:.1f}" for p, v in ms.items() if v))
    notes = {p: w.info["note"] for p, w in workers.items()}
    for w in workers.values():
        w.close()
    shutil.rmtree(cache, ignore_errors=True)
    med = {p: statistics.median(v) for p, v in ms.items() if v and p not in errors}
    # A ratio is the median of the rounds' ratios: the load here drifts over
    # minutes, and peers timed in one round saw about the same load.
    ratio = {p: statistics.median(v / t for v, t in zip(ms[p], ms["trainstep"]))
             for p in med if p != "trainstep"}
    compile_s = {p: sum(workers[p].info["warmup_s"]) - WARMUP * med[p] / 1e3
                 for p in med if p != "trainstep"}
    compile_s["trainstep"] = statistics.median(ts_load)
    return {"model": model, "threads": threads, "peers": a.peers, "prefix": prefix, "ms": med, "ratio": ratio, "errors": errors,
            "compile_s": compile_s, "notes": notes, "problems": problems, "art": art}


def profile(row, a):
    """trainstep's per-op profile: the heading and top lines."""
    _, _, out = trainstep_bench(row["art"], a.steps, row["threads"], warmup=WARMUP, profile=True,
                                prefix=row["prefix"])
    lines = out.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("op ")), None)
    if start is None:
        return out
    tail = [l for l in lines if l.startswith(("compute kernels", "outside compute"))]
    return "\n".join(lines[start:start + 1 + PROFILE_LINES] + ["..."] + tail)


def cell(row, p):
    if p in row["errors"]:
        return "failed: " + row["errors"][p].replace("|", "/")
    if p not in row["ms"]:
        return "n/a" if p in row["peers"] else "not run"  # n/a: JAX has the MNIST CNN only
    return f"{row['ratio'][p]:.2f}"


def table(rows):
    head = ("| model | threads | trainstep ms/step | eager ratio | compile ratio | "
            "max-autotune ratio | jax ratio | compile s: compile / max-autotune / jax / trainstep |")
    out = [head, "|" + "---|" * 8]
    for row in rows:
        c = row["compile_s"]
        comp = " / ".join(f"{c[p]:.1f}" if p in c else "-" for p in
                          ["compile", "max-autotune", "jax", "trainstep"])
        out.append(f"| {row['model']} | {row['threads']} | {row['ms']['trainstep']:.2f} | "
                   + " | ".join(cell(row, p) for p in PEERS) + f" | {comp} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-python", required=True, help="the torch 2.x venv's python")
    ap.add_argument("--jax-python", default="", help="the JAX venv's python (none: no JAX peer)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--steps", type=int, default=5, help="timed steps per peer per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compile-timeout", type=float, default=600,
                    help="seconds a peer may take to build and compile its step")
    ap.add_argument("--step-timeout", type=float, default=300)
    ap.add_argument("--pin-all", action="store_true",
                    help="hold every peer, not only JAX, to the first T CPUs (taskset)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "peers"))
    a = ap.parse_args()
    a.peers = a.peers.split(",")
    a.out = os.path.abspath(a.out)
    logs = os.path.join(a.out, "logs")
    os.makedirs(logs, exist_ok=True)
    t_start, load0 = time.monotonic(), os.getloadavg()[0]
    rows, exports, profiles = [], {}, []
    for model in a.models.split(","):
        try:
            art, exports[model] = export(model, a.out, a.torch_python)
        except RuntimeError as e:
            exports[model] = str(e)
            log(f"{model}: {e}; skipped")
            continue
        for t in map(int, a.threads.split(",")):
            rows.append(measure(model, t, art, a, logs))
            slower = [p for p, r in rows[-1]["ratio"].items() if r < 1]
            if slower:
                profiles.append((rows[-1], slower, profile(rows[-1], a)))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    report = [f"# bench/peers: {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
              f"{a.steps} steps x {a.rounds} rounds, {time.monotonic() - t_start:.0f} s, "
              f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
              "(above the CPU count, 2-thread figures mostly time the scheduler)", "",
              "Ratio = peer ms/step / trainstep ms/step in the same round, median over rounds "
              "(peers alternate; above 1: trainstep is faster). trainstep ms/step: median "
              "over rounds. Compile s: the first 3 calls less 3 steady "
              "steps, in a fresh inductor cache; trainstep: load+compile of the artifact.", "",
              table(rows), "", "## Notes", ""]
    for model, note in exports.items():
        report.append(f"- {model}: {note}")
    seen = set()
    for row in rows:
        for p, n in row["notes"].items():
            if (row["threads"], p, n) not in seen:
                seen.add((row["threads"], p, n))
                report.append(f"- {row['model']} threads={row['threads']} {p}: {n}")
        for p, n in row["problems"].items():
            report.append(f"- {row['model']} threads={row['threads']} {p}: {n}")
    report.append("- every Python peer: MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ 256 MiB "
                  "and flush-to-zero (torch.set_flush_denormal; XLA --xla_cpu_ftz), "
                  "OMP_NUM_THREADS=MKL_NUM_THREADS=threads; trainstep: --threads")
    report.append("- CPU affinity: JAX is held to the first T CPUs by taskset when T is below "
                  "the CPU count (XLA sizes its thread pool by the affinity); the others are "
                  + ("too (--pin-all)" if a.pin_all else "not (--pin-all would)"))
    for row, slower, prof in profiles:
        report += ["", f"## trainstep slower than {', '.join(slower)}: {row['model']}, "
                   f"threads={row['threads']}", "", "```", prof, "```"]
    text = "\n".join(report) + "\n"
    with open(os.path.join(a.out, "peers.md"), "w") as f:
        f.write(text)
    print("\n" + text)
    log(f"written {os.path.join(a.out, 'peers.md')}")


if __name__ == "__main__":
    main()
