"""bench/peers: its JAX MNIST CNN is the spec's math (oracle: torch eager on
the same weights, batch and dropout masks), and the bench runs end to end.
No timing is checked. Uses the JAX venv (bench/peers/jax-env.sh) and the
torch 2.x venv (scripts/torch2-env.sh) where they are made; skips otherwise,
installing nothing."""
import glob
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import BIN, ROOT

PEERS = os.path.join(ROOT, "bench", "peers")
CACHE = os.environ.get("TRAINSTEP_CACHE", os.path.expanduser("~/.cache/trainstep"))


def jax_python():
    p = subprocess.run([os.path.join(PEERS, "jax-env.sh"), "--path"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        pytest.skip("no JAX environment (bench/peers/jax-env.sh makes it)")
    return p.stdout.strip()


def torch2_python():
    made = sorted(glob.glob(os.path.join(CACHE, "torch-2.*", ".complete")))
    if not made:
        pytest.skip("no torch 2.x environment (scripts/torch2-env.sh makes it)")
    return os.path.join(os.path.dirname(made[-1]), "bin", "python")


def torch_two_steps(tmp_path):
    """Two eager steps of the MNIST spec, recording dropout's masks; returns
    (the JAX oracle's input file, initial state, losses, step-0 grads, final state)."""
    from trainstep.exporter import load_spec
    spec = load_spec(os.path.join(ROOT, "examples", "mnist", "spec.py"))
    model, opt = spec.model, spec.optimizer
    x, y = spec.example_inputs[0], spec.example_target
    sd0 = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    masks = []
    # Kept = nonzero output; where the input is 0 the mask does not matter
    # (the output is 0 either way and ReLU passes no gradient there).
    model.dropout1.register_forward_hook(
        lambda m, i, o: masks.append(("mask1", (o != 0).float().permute(0, 2, 3, 1).numpy())))
    model.dropout2.register_forward_hook(
        lambda m, i, o: masks.append(("mask2", (o != 0).float().numpy())))
    model.train()
    losses, grads = [], {}
    for i in range(2):
        opt.zero_grad()
        loss = spec.loss_fn(model(x), y)
        loss.backward()
        if i == 0:
            grads = {k: p.grad.numpy().copy() for k, p in model.named_parameters()}
        opt.step()
        losses.append(loss.item())
    src = str(tmp_path / "in.npz")
    feed = {f"sd/{k}": v for k, v in sd0.items()}
    feed.update({f"{name}_{i // 2}": m for i, (name, m) in enumerate(masks)})
    np.savez(src, x=x.numpy(), y=y.numpy(), **feed)
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return src, sd0, losses, grads, sd


def test_jax_mnist_matches_torch(tmp_path):
    py = jax_python()
    src, sd0, losses, grads, sd = torch_two_steps(tmp_path)
    dst = str(tmp_path / "out.npz")
    subprocess.run([py, os.path.join(PEERS, "oracle_jax.py"), src, dst], check=True,
                   cwd=PEERS, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    j = np.load(dst)
    for i, loss in enumerate(losses):
        assert abs(float(j[f"loss_{i}"]) - loss) < 1e-5 * max(1, abs(loss)), (i, loss)
    for k, g in grads.items():
        np.testing.assert_allclose(j[f"grad/{k}"], g, rtol=1e-3, atol=1e-6, err_msg=k)
    for k, p in sd.items():
        # Compare what the two steps moved (Adadelta's steps are ~3e-3).
        np.testing.assert_allclose(j[f"sd/{k}"] - sd0[k], p - sd0[k], rtol=1e-3, atol=2e-6,
                                   err_msg=k)


def test_bench_runs_end_to_end(tmp_path):
    jpy, tpy = jax_python(), torch2_python()
    p = subprocess.run([sys.executable, os.path.join(PEERS, "peers.py"), "--torch-python", tpy,
                        "--jax-python", jpy, "--models", "mnist", "--threads", "1",
                        "--peers", "eager,jax", "--steps", "2", "--rounds", "2",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, TRAINSTEP_BIN=BIN))
    assert p.returncode == 0, p.stdout + p.stderr
    row = [line for line in p.stdout.splitlines() if line.startswith("| mnist | 1 |")]
    assert row and "failed" not in row[0], p.stdout + p.stderr
    cells = [c.strip() for c in row[0].strip("|").split("|")]
    assert float(cells[2]) > 0 and float(cells[3]) > 0 and float(cells[6]) > 0, row[0]
    assert open(tmp_path / "peers.md").read().count("| mnist | 1 |") == 1
