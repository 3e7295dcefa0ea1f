"""Optimizers traced from their own step() (trainstep/traced_optim.py):
torch.optim's list and optimizers written here as users write theirs.

The oracle is the optimizer itself: the traced graph is run in torch
against eager step() calls (pure Python), and whole steps are exported and
verified against eager PyTorch's golden trace in C++. A planted bug that
only the captured step has must fail verify."""
import os

import pytest
import torch

from conftest import SPECS, run

SPEC = os.path.join(SPECS, "traced_optim.py")
TORCH2 = hasattr(torch, "compiler")
needs_torch2 = pytest.mark.skipif(not TORCH2, reason="torch's optimizers trace under 2.x")

# torch.optim's whole list but LBFGS (a closure re-evaluating the model) and
# SparseAdam (sparse gradients).
TORCH_CASES = [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("Adadelta", dict(lr=1.0)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1)),
    ("RAdam", dict(lr=0.01)),
    ("Adamax", dict(lr=0.01, weight_decay=0.01)),
    ("ASGD", dict(lr=0.01, t0=2)),
    ("Rprop", dict(lr=0.01)),
]


def _user(name, params, **kw):
    import sys
    sys.path.insert(0, SPECS)
    import user_optimizers
    return getattr(user_optimizers, name)(params, **kw)


def _trace_and_compare(make, steps=6):
    """The traced update, run in torch, against the optimizer's eager
    step() for `steps` steps on random gradients."""
    from trainstep import scalars
    from trainstep.compat import functionalize, make_fx
    from trainstep.traced_optim import TracedOptimizer
    g = torch.Generator().manual_seed(0)
    shapes = {"a": (3, 4), "b": (5,), "c": ()}
    ref = {n: torch.randn(s, generator=g).requires_grad_() for n, s in shapes.items()}
    opt = make(list(ref.values()))
    f = TracedOptimizer(opt, [list(shapes)], set(shapes), ref)
    state = f.init_state(ref)
    keys = list(state)

    def fn(lr, *flat):
        ps = dict(zip(shapes, flat[:3]))
        gs = dict(zip(shapes, flat[3:6]))
        new_p, new_s = f.update(ps, gs, dict(zip(keys, flat[6:])), lr)
        return (*[new_p[n] for n in shapes], *[new_s[k] for k in keys])
    lr = torch.tensor(opt.param_groups[0]["lr"], dtype=torch.float64)
    params = [p.detach().clone() for p in ref.values()]
    example = [torch.randn(s, generator=g) for s in shapes.values()]
    with scalars.environment_patches().applied():  # as trace.py traces
        gm = make_fx(functionalize(fn))(lr, *params, *example, *[state[k] for k in keys])
    st = [state[k] for k in keys]
    for _ in range(steps):
        grads = [torch.randn(s, generator=g) for s in shapes.values()]
        for p, gr in zip(ref.values(), grads):
            p.grad = gr.clone()
        opt.step()
        out = gm(lr, *params, *grads, *st)
        params, st = list(out[:3]), list(out[3:])
        for (n, p), mine in zip(ref.items(), params):
            torch.testing.assert_close(mine, p.detach(), rtol=2e-6, atol=1e-6, msg=n)
    mine = f.state_from_torch(opt, ref)
    for k, v in zip(keys, st):
        if k != "optim/step":
            torch.testing.assert_close(v, mine[k], rtol=2e-6, atol=1e-6, msg=k)
    return f


@needs_torch2
@pytest.mark.parametrize("name,kw", TORCH_CASES, ids=lambda v: str(v))
def test_torch_optimizer_traces_like_eager(name, kw):
    _trace_and_compare(lambda ps: getattr(torch.optim, name)(ps, **kw))


def test_user_optimizer_with_python_int_step_traces_like_eager():
    f = _trace_and_compare(lambda ps: _user("SignMomentum", ps, lr=0.01, weight_decay=0.1))
    assert f.layout["a"]["step"].kind == "int"  # a Python int, kept as a 0-d tensor
    assert not f.first_step


def test_first_step_that_differs_is_kept_apart():
    """TwoRules' momentum buffer starts as the gradient itself: the traced
    step picks the first step's update by the step count."""
    f = _trace_and_compare(lambda ps: _user("TwoRules", ps, rule="momentum", lr=0.05))
    assert f.first_step


def _export(tmp_path, optim, name="t", capture=None):
    out = str(tmp_path / f"{name}.tstep")
    env = {"TS_OPTIM": optim}
    if capture:
        env["TS_OPTIM_CAPTURE"] = capture
    p = run("export", SPEC, "--out", out, env=env, check=False)
    return out, p


def _verify(path):
    p = run("verify", path, "--threads", "1", check=False)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("optim,state", [("SignMomentum", "optim/fc1.weight/step"),
                                         ("TwoRules", "optim/fc1.weight/t"),
                                         ("GroupStep", "optim/param_groups/0/step"),
                                         ("Muon", "optim/fc1.weight/momentum_buffer"),
                                         ("MuonBf16", "optim/fc1.weight/momentum_buffer"),
                                         ("Bounded", "optim/param_groups/0/step")])
def test_user_optimizer_exports_and_verifies(tmp_path, optim, state):
    art, p = _export(tmp_path, optim)
    assert p.returncode == 0, p.stderr
    rc, out = _verify(art)
    assert rc == 0 and out.strip().splitlines()[-1] == "verify: ok", out
    assert f"state {state}" in out


@needs_torch2
@pytest.mark.parametrize("optim", ["NAdam:lr=0.01", "Rprop:lr=0.001",
                                   "Adam:lr=0.01,amsgrad=True"])
def test_torch_optimizer_exports_and_verifies(tmp_path, optim):
    art, p = _export(tmp_path, optim, capture="traced")
    assert p.returncode == 0, p.stderr
    rc, out = _verify(art)
    assert rc == 0 and out.strip().splitlines()[-1] == "verify: ok", out


@needs_torch2
def test_planted_wrong_update_fails_verify(tmp_path):
    art, p = _export(tmp_path, "SignMomentum:wrong=True")
    assert p.returncode == 0, p.stderr
    rc, out = _verify(art)
    assert rc != 0 and "MISMATCH" in out and "update " in out, out


@pytest.mark.parametrize("optim,what", [
    ("Warmup", "compares such a number at `lr = group[\"lr\"] if state[\"step\"] > 10"),
    ("ReadsItem", "calls .item()")])
def test_step_that_branches_or_reads_is_one_line(tmp_path, optim, what):
    _, p = _export(tmp_path, optim)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "user_optimizers.py:" in lines[0] and what in lines[0], p.stderr


@pytest.mark.skipif(TORCH2, reason="torch 1.13's own optimizers are refused")
def test_torch_113_optimizer_outside_the_rules_is_refused(tmp_path):
    _, p = _export(tmp_path, "NAdam:lr=0.01")
    assert p.returncode != 0 and "only under torch 2.x" in p.stderr, p.stderr


def test_lr_schedule_matches_eager_over_50_steps(tmp_path):
    """`train --lr-schedule cosine:50:1e-4 --lr-schedule-unit step` on a
    traced user optimizer against eager with the same cosine as LambdaLR:
    the LR reaches step() as a runtime input, each step's own."""
    import math
    import sys
    import torch.nn.functional as F
    sys.path.insert(0, SPECS)
    from test_features import repeated_sample_data
    art, p = _export(tmp_path, "SignMomentum")
    assert p.returncode == 0, p.stderr
    x1, label = repeated_sample_data(str(tmp_path / "d"), 400)  # 50 batches of 8
    ckpt = tmp_path / "s.ckpt"
    run("train", art, "--data", f"idx:{tmp_path / 'd'}", "--epochs", 1, "--seed", 2,
        "--lr-schedule", "cosine:50:1e-4", "--lr-schedule-unit", "step", "--save", ckpt,
        "--threads", 1)
    spec = _build("SignMomentum")
    model, opt = spec.model, spec.optimizer
    base = opt.param_groups[0]["lr"]
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: (1e-4 + (base - 1e-4) * (1 + math.cos(math.pi * k / 50)) / 2) / base)
    x, y = x1.expand(8, 1, 28, 28).contiguous(), torch.full((8,), label)
    for _ in range(50):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        sched.step()
    from trainstep import checkpoint
    got, _, meta = checkpoint.load(str(ckpt))
    assert meta["step"] == "50"
    for n, v in model.state_dict().items():
        torch.testing.assert_close(got[n], v, rtol=1e-4, atol=1e-5, msg=n)


def _build(optim):
    import sys
    sys.path.insert(0, SPECS)
    import traced_optim
    was = os.environ.get("TS_OPTIM")
    os.environ["TS_OPTIM"] = optim
    try:
        return traced_optim.build()
    finally:
        if was is None:
            del os.environ["TS_OPTIM"]
        else:
            os.environ["TS_OPTIM"] = was


@pytest.mark.parametrize("optim", ["SignMomentum", "TwoRules", "GroupStep"])
def test_checkpoint_round_trips_through_pytorch(tmp_path, optim):
    """2 eager steps -> torch.save -> import-checkpoint -> export-checkpoint:
    the same state_dict, the Python-int step counts as ints, and the user's
    optimizer loads it."""
    import torch.nn.functional as F
    art, p = _export(tmp_path, optim)
    assert p.returncode == 0, p.stderr
    spec = _build(optim)
    for _ in range(2):
        spec.optimizer.zero_grad()
        F.cross_entropy(spec.model(*spec.example_inputs), spec.example_target).backward()
        spec.optimizer.step()
    src = tmp_path / "torch.pt"
    torch.save({"model": spec.model.state_dict(), "optimizer": spec.optimizer.state_dict()}, src)
    run("import-checkpoint", art, src, "--out", tmp_path / "ts.ckpt")
    run("export-checkpoint", art, tmp_path / "ts.ckpt", "--out", tmp_path / "back.pt")
    back = torch.load(tmp_path / "back.pt")
    want = spec.optimizer.state_dict()
    assert back["optimizer"]["state"].keys() == want["state"].keys()
    for mine, theirs in zip(back["optimizer"]["param_groups"], want["param_groups"]):
        assert mine.keys() == theirs.keys() and mine.get("step") == theirs.get("step")
        assert type(mine.get("step")) is type(theirs.get("step"))
    for i, st in want["state"].items():
        assert st.keys() == back["optimizer"]["state"][i].keys()
        for k, v in st.items():
            got = back["optimizer"]["state"][i][k]
            assert type(got) is type(v), (i, k, type(got))
            assert torch.equal(got, v) if isinstance(v, torch.Tensor) else got == v
    for n, v in spec.model.state_dict().items():
        assert torch.equal(back["model"][n], v), n
    fresh = _build(optim)
    fresh.optimizer.load_state_dict(back["optimizer"])


@pytest.mark.parametrize("optim", ["SignMomentum", "GroupStep"])
def test_checkpoint_before_any_step_has_no_lazy_state(tmp_path, optim):
    """At step 0 torch has made no state yet, in the parameters' state or
    in the param groups; the exported state_dict says so."""
    art, p = _export(tmp_path, optim)
    assert p.returncode == 0, p.stderr
    spec = _build(optim)
    src = tmp_path / "torch.pt"
    torch.save({"model": spec.model.state_dict()}, src)
    run("import-checkpoint", art, src, "--out", tmp_path / "ts.ckpt")
    run("export-checkpoint", art, tmp_path / "ts.ckpt", "--out", tmp_path / "back.pt")
    back = torch.load(tmp_path / "back.pt")["optimizer"]
    assert back["state"] == {} and "step" not in back["param_groups"][0]


def test_lbfgs_is_refused_in_one_line():
    from trainstep import TrainSpec
    from trainstep.capture import functional_optimizer
    from trainstep.optim import UnsupportedOptimizer
    w = torch.nn.Parameter(torch.zeros(2))
    spec = TrainSpec(None, None, torch.optim.LBFGS([w]), (), None)
    with pytest.raises(UnsupportedOptimizer, match="LBFGS is not supported: its step"):
        functional_optimizer(spec, [["w"]], {"w"}, {"w": w})


def test_group_step_count_traces_like_eager():
    """A step count kept in the param group is state of its own, a Python
    int as torch keeps it, added by the first step."""
    f = _trace_and_compare(lambda ps: _user("GroupStep", ps, lr=0.01))
    g = f.groups[0]
    assert g.state["step"].kind == "int" and g.start == {"step": 0} and g.lazy == ["step"]
    assert "step" not in g.options


def test_traced_lr_through_full_and_clamp_traces_like_eager():
    """torch.full(size, lr) and clamp(lower, upper) with bounds made of the
    LR and a step count keep the LR a runtime input."""
    _trace_and_compare(lambda ps: _user("Bounded", ps, lr=0.01))


def test_other_group_options_changed_by_step_are_refused(tmp_path):
    _, p = _export(tmp_path, "GroupOption")
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "changes param group 0's 'history'" in lines[0], p.stderr


def test_a_leaked_plain_float_is_named(tmp_path):
    _, p = _export(tmp_path, "BoundSqrt")
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "turned the learning rate or a step count into a plain" \
        in lines[0], p.stderr
