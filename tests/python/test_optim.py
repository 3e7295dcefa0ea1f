"""The functional optimizers against torch.optim eager, step by step, on
random parameters and gradients (pure Python: no capture, no C++)."""
import pytest
import torch

from trainstep import optim as ts_optim

CASES = [
    (torch.optim.SGD, dict(lr=0.1)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.8, dampening=0.3)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.5, maximize=True)),
    (torch.optim.Adadelta, dict(lr=1.0)),
    (torch.optim.Adadelta, dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.01)),
    (torch.optim.Adam, dict(lr=1e-3)),
    (torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=1e-2)),
    (torch.optim.Adam, dict(lr=0.01, amsgrad=True, maximize=True)),
    (torch.optim.AdamW, dict(lr=1e-3)),
    (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    (torch.optim.AdamW, dict(lr=0.01, betas=(0.5, 0.9), maximize=True)),
    (torch.optim.RMSprop, dict(lr=0.01)),
    (torch.optim.RMSprop, dict(lr=0.01, centered=True)),
    (torch.optim.RMSprop, dict(lr=0.01, momentum=0.9, weight_decay=0.01)),
    (torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-6, centered=True, momentum=0.5,
                               maximize=True)),
    (torch.optim.Adagrad, dict(lr=0.1)),
    (torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.05, weight_decay=0.01)),
    (torch.optim.Adagrad, dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-6, maximize=True)),
]


@pytest.mark.parametrize("cls,kw", CASES, ids=lambda v: str(v))
def test_matches_torch_optim(cls, kw):
    g = torch.Generator().manual_seed(0)
    shapes = {"a": (3, 4), "b": (5,), "c": ()}
    params = {n: torch.randn(s, generator=g) for n, s in shapes.items()}
    ref = {n: p.clone().requires_grad_() for n, p in params.items()}
    opt = cls(list(ref.values()), **kw)
    f = ts_optim.from_torch(opt, [list(shapes)])
    state = f.init_state(params)
    before = f.state_from_torch(opt, ref)  # torch's state before any step
    assert set(before) == set(state)
    for k in state:
        torch.testing.assert_close(state[k], before[k], rtol=0, atol=0)
    lr = torch.tensor(kw["lr"])
    for _ in range(6):
        grads = {n: torch.randn(s, generator=g) for n, s in shapes.items()}
        for n, p in ref.items():
            p.grad = grads[n].clone()
        opt.step()
        params, state = f.update(params, grads, state, lr)
        for n in shapes:
            torch.testing.assert_close(params[n], ref[n].detach(), rtol=1e-6, atol=1e-7)
    mine = f.state_from_torch(opt, ref)
    assert set(mine) == set(state)
    for k in state:
        if k != ts_optim.STEP:
            # atol: 2 float32 ulps of the tensor's scale. torch's addcmul_ is
            # a fused multiply-add (a + v*b*c rounded once; checked exactly on
            # this machine) and our graph rounds twice; RMSprop's momentum
            # buffer (scale ~10-20, 1 ulp ~1e-6) sums g/avg with cancellation,
            # so 1-ulp differences reach 1.2e-6 absolute there.
            scale = float(mine[k].abs().max())
            torch.testing.assert_close(state[k], mine[k], rtol=1e-6,
                                       atol=max(1e-7, 2.4e-7 * scale))


@pytest.mark.parametrize("cls,kw", CASES, ids=lambda v: str(v))
def test_float64_matches_torch_optim(cls, kw):
    """float64 parameters, with the float64 LR input such models get
    (capture.lr_dtype): torch computes the step's scalars (bias corrections,
    decayed LRs) in Python floats, and so must we in float64, or the update
    is off by float32 rounding (1e-7 relative)."""
    g = torch.Generator().manual_seed(0)
    shapes = {"a": (3, 4), "b": (5,), "c": ()}
    params = {n: torch.randn(s, generator=g, dtype=torch.float64) for n, s in shapes.items()}
    ref = {n: p.clone().requires_grad_() for n, p in params.items()}
    opt = cls(list(ref.values()), **kw)
    f = ts_optim.from_torch(opt, [list(shapes)])
    state = f.init_state(params)
    lr = torch.tensor(kw["lr"], dtype=torch.float64)
    for _ in range(6):
        grads = {n: torch.randn(s, generator=g, dtype=torch.float64) for n, s in shapes.items()}
        for n, p in ref.items():
            p.grad = grads[n].clone()
        opt.step()
        params, state = f.update(params, grads, state, lr)
        for n in shapes:
            assert params[n].dtype == torch.float64
            torch.testing.assert_close(params[n], ref[n].detach(), rtol=1e-12, atol=1e-13)
    mine = f.state_from_torch(opt, ref)
    for k in state:
        if k != ts_optim.STEP:
            assert mine[k].dtype == torch.float64, k  # torch's state, kept in its dtype
            torch.testing.assert_close(state[k], mine[k], rtol=1e-12, atol=1e-13)


def test_unsupported_optimizer_is_named():
    opt = torch.optim.LBFGS([torch.zeros(2, requires_grad=True)])
    with pytest.raises(ts_optim.UnsupportedOptimizer, match="LBFGS is not supported; supported: "
                       "Adadelta, Adagrad, Adam, AdamW, RMSprop, SGD"):
        ts_optim.from_torch(opt)


@pytest.mark.parametrize("cls,kw,msg", [
    (torch.optim.Adam, dict(capturable=True), r"Adam: capturable=True is not supported \(supported: \[False, None\]\)"),
    (torch.optim.RMSprop, dict(differentiable=True), r"RMSprop: differentiable=True is not supported"),
])
def test_unsupported_option_is_named(cls, kw, msg):
    opt = cls([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(ts_optim.UnsupportedOptimizer, match=msg):
        ts_optim.from_torch(opt)


@pytest.mark.parametrize("beta", [0.9, 0.99, 0.999, 0.9999])
def test_bias_correction_precision(beta):
    """1 - beta ** step on a float32 step tensor vs torch's float64 value
    rounded to float32: at most 2 float32 ulps (eps * |value|) over the
    first 10^5 steps; measured 0.77 / 0.95 / 1.07 / 1.11 ulps for beta =
    0.9 / 0.99 / 0.999 / 0.9999, where 1 - pow(float32 beta, step) is off by
    3e-7 / 1.8e-6 / 2e-5 / 2.2e-4 relative."""
    steps = torch.arange(1, 100001, dtype=torch.float32)
    mine = ts_optim._bias_correction(beta, steps)
    ref = (1 - beta ** steps.double()).float()
    ulp = torch.finfo(torch.float32).eps * ref.abs()
    assert ((mine - ref).abs() <= 2 * ulp).all(), ((mine - ref).abs() / ulp).max()


GROUP_CASES = [
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-2),
     dict(lr=0.01, momentum=0.5, dampening=0.2)),
    (torch.optim.SGD, dict(lr=0.1), dict(lr=0.3, momentum=0.9, nesterov=True)),
    (torch.optim.Adadelta, dict(lr=1.0, weight_decay=1e-2), dict(lr=0.5, rho=0.8)),
    (torch.optim.Adam, dict(lr=1e-2, weight_decay=1e-2),
     dict(lr=1e-3, betas=(0.8, 0.9), amsgrad=True)),
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1), dict(lr=3e-2, weight_decay=0)),
    (torch.optim.RMSprop, dict(lr=0.01), dict(lr=0.02, centered=True, momentum=0.5)),
    (torch.optim.Adagrad, dict(lr=0.1), dict(lr=0.05, lr_decay=0.01, initial_accumulator_value=0.3)),
]


@pytest.mark.parametrize("cls,g0,g1", GROUP_CASES, ids=lambda v: str(v))
def test_param_groups_match_torch(cls, g0, g1):
    """Two groups with their own hyper-parameters; group 1's LR is a fixed
    multiple of the runtime LR. Parameter d gets no gradient: torch skips it
    (no update, no state), and so must we."""
    g = torch.Generator().manual_seed(1)
    shapes = {"a": (3, 4), "b": (4,), "c": (2, 3), "d": (5,)}
    ref = {n: torch.randn(s, generator=g).requires_grad_() for n, s in shapes.items()}
    params = {n: p.detach().clone() for n, p in ref.items()}
    opt = cls([{"params": [ref["a"], ref["b"]], **g0}, {"params": [ref["c"], ref["d"]], **g1}])
    f = ts_optim.Optimizer(opt, [["a", "b"], ["c", "d"]], updated={"a", "b", "c"})
    assert f.updated == ["a", "b", "c"]
    assert [gr.lr_scale for gr in f.groups] == [1.0, g1["lr"] / g0["lr"]]
    state = f.init_state(params)
    assert not any(k.startswith("optim/d/") for k in state)
    before = f.state_from_torch(opt, ref)
    assert set(before) == set(state)
    for k in state:
        assert torch.equal(state[k], before[k]), k
    lr = torch.tensor(g0["lr"])
    for _ in range(5):
        grads = {n: torch.randn(shapes[n], generator=g) for n in "abc"}
        for n in "abc":
            ref[n].grad = grads[n].clone()
        opt.step()
        new_p, state = f.update(params, grads, state, lr)
        params.update(new_p)
        for n in shapes:
            # atol 1e-6: group 1's LR is float32(lr) * ratio here but
            # float32(lr_1) in torch, 1 ulp apart.
            torch.testing.assert_close(params[n], ref[n].detach(), rtol=2e-6, atol=1e-6)
    assert "d" not in new_p
    assert torch.equal(params["d"], ref["d"].detach())  # never touched
    mine = f.state_from_torch(opt, ref)
    assert set(mine) == set(state)
    for k in state:
        if k == ts_optim.STEP and f.torch_step is None:
            continue  # SGD counts no steps
        scale = float(mine[k].abs().max())
        torch.testing.assert_close(state[k], mine[k], rtol=1e-6, atol=max(1e-7, 2.4e-7 * scale))


def test_group_lr_zero_base_is_refused():
    a, b = torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    opt = torch.optim.SGD([{"params": [a], "lr": 0.0}, {"params": [b], "lr": 0.1}], lr=0.1)
    with pytest.raises(ts_optim.UnsupportedOptimizer, match="group 0's LR must not be 0"):
        ts_optim.from_torch(opt)


def test_unequal_steps_are_refused():
    """torch counts steps per parameter; trainstep keeps one count."""
    a, b = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    opt = torch.optim.Adam([a, b], lr=0.1)
    a.grad = torch.ones(2)
    opt.step()  # b has no gradient: its state stays empty
    f = ts_optim.from_torch(opt, [["a", "b"]])
    with pytest.raises(ts_optim.UnsupportedOptimizer, match=r"different numbers of optimizer "
                       r"steps \(\[0.0, 1.0\]\)"):
        f.state_from_torch(opt, {"a": a, "b": b})


def test_onecycle_momentum_cycling_is_refused():
    """OneCycleLR(cycle_momentum=True) rewrites momentum every step; the
    captured step has it as a constant, so export names the way out."""
    p = torch.zeros(2, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    with pytest.raises(ts_optim.UnsupportedOptimizer, match=r"OneCycleLR\(cycle_momentum=True\)"):
        ts_optim.from_torch(opt)
    opt = torch.optim.Adam([p], lr=0.1)
    torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, cycle_momentum=False)
    assert ts_optim.from_torch(opt).groups[0].rule.h["betas"] == (0.9, 0.999)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [1.0, 1e3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    """The graph's clipping vs torch.nn.utils.clip_grad_norm_ (1.13), both
    when it clips (max_norm 1) and when it does not (coefficient clamped at 1)."""
    from trainstep.capture import clip_grad_norm
    g = torch.Generator().manual_seed(2)
    ps = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in [(5, 4), (7,), ()]]
    grads = {i: 3 * torch.randn(p.shape, generator=g) for i, p in enumerate(ps)}
    for i, p in enumerate(ps):
        p.grad = grads[i].clone()
    total = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type)
    assert (total > max_norm) == (max_norm == 1.0)
    mine = clip_grad_norm(grads, max_norm, norm_type)
    for i, p in enumerate(ps):
        torch.testing.assert_close(mine[i], p.grad, rtol=1e-6, atol=0)
