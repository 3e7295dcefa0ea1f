"""The training step of a spec on one GPU: eager PyTorch and
torch.compile(mode="reduce-overhead") against `trainstep bench --device cuda`,
timed in one run on the same GPU, fp32 with TF32 off on every side.

    python3 bench/cuda/peers.py SPEC.py ARTIFACT.tstep [--steps 200] [--rounds 5]

Every side runs the same step (zero_grad, forward, loss, backward,
optimizer.step()) on the spec's example batch and waits for it each step,
as trainstep's train_step does (it returns the loss). The Python peers are
timed with a host clock around each synchronised step; trainstep's figure is
`trainstep bench`'s median. Rounds rotate the three, and each ratio is
peer / trainstep in the same round, median over rounds (above 1: trainstep
is faster). Prints one Markdown row per spec.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))


def load(path):
    """The spec's build() result. The module is registered under its name,
    as an import would, since torch.compile re-imports the modules the step
    refers to."""
    import importlib.util
    name = "spec_" + os.path.splitext(os.path.basename(path))[0]
    s = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(s)
    sys.modules[name] = mod
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    s.loader.exec_module(mod)
    return mod.build()


def cuda_step(spec, compiled):
    import torch
    # Module.cuda() moves each parameter's data in place, so the spec's own
    # optimizer (state made at its first step) now updates GPU tensors;
    # capturable keeps its step count on the GPU, as CUDA graphs need.
    model = spec.model.cuda().train()
    opt = spec.optimizer
    for g in opt.param_groups:
        if "capturable" in g:
            g["capturable"] = True
    xs = [x.cuda() for x in spec.example_inputs]
    y = spec.example_target.cuda()
    loss_fn = spec.loss_fn

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(*xs), y)
        loss.backward()
        opt.step()
        return loss
    if not compiled:
        return step
    # One eager step first, so the optimizer's state (SGD's momentum buffers)
    # exists outside the recorded graphs; each call then starts a new graph
    # step, or reading last step's outputs fails ("overwritten by a
    # subsequent run", seen with the ResNet's SGD on torch 2.11).
    step()
    cstep = torch.compile(step, mode="reduce-overhead")

    def marked():
        torch.compiler.cudagraph_mark_step_begin()
        return cstep()
    return marked


def time_steps(step, n):
    import torch
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def trainstep_ms(binary, artifact, steps):
    out = subprocess.run([binary, "bench", artifact, "--device", "cuda", "--steps", str(steps),
                          "--warmup", "20"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"trainstep bench failed:\n{out.stdout}\n{out.stderr}")
    m = re.search(r"step_ms_median=([0-9.]+)", out.stdout)
    d = re.search(r"train_step: (.*)", out.stdout)
    return float(m.group(1)), (d.group(1) if d else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("artifact")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "trainstep"))
    a = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    eager = cuda_step(load(a.spec), compiled=False)
    comp = cuda_step(load(a.spec), compiled=True)
    t0 = time.perf_counter()
    for _ in range(5):  # warm-up, and the compile (recorded graphs need 3 calls)
        comp()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    for _ in range(20):
        eager()
    rows = []
    for _ in range(a.rounds):
        ts_ms, how = trainstep_ms(a.binary, a.artifact, a.steps)
        e_ms = time_steps(eager, a.steps)
        c_ms = time_steps(comp, a.steps)
        rows.append((ts_ms, e_ms, c_ms))
    med = lambda xs: statistics.median(xs)
    ts_ms = med([r[0] for r in rows])
    e_ms = med([r[1] for r in rows])
    c_ms = med([r[2] for r in rows])
    er = med([r[1] / r[0] for r in rows])
    cr = med([r[2] / r[0] for r in rows])
    name = os.path.basename(a.artifact)
    print(f"trainstep: {how}")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; compile (reduce-overhead) "
          f"warm-up {compile_s:.1f} s")
    print("| artifact | trainstep ms/step | eager ms/step | compile ms/step | eager / trainstep "
          "| compile / trainstep |")
    print(f"| {name} | {ts_ms:.3f} | {e_ms:.3f} | {c_ms:.3f} | **{er:.2f}x** | **{cr:.2f}x** |")


if __name__ == "__main__":
    main()
