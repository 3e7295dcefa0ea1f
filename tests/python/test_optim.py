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
]


@pytest.mark.parametrize("cls,kw", CASES, ids=lambda v: str(v))
def test_matches_torch_optim(cls, kw):
    g = torch.Generator().manual_seed(0)
    shapes = {"a": (3, 4), "b": (5,), "c": ()}
    params = {n: torch.randn(s, generator=g) for n, s in shapes.items()}
    ref = {n: p.clone().requires_grad_() for n, p in params.items()}
    opt = cls(list(ref.values()), **kw)
    f = ts_optim.from_torch(opt)
    state = f.init_state(params)
    lr = torch.tensor(kw["lr"])
    for _ in range(6):
        grads = {n: torch.randn(s, generator=g) for n, s in shapes.items()}
        for n, p in ref.items():
            p.grad = grads[n].clone()
        opt.step()
        params, state = f.update(params, grads, state, lr)
        for n in shapes:
            torch.testing.assert_close(params[n], ref[n].detach(), rtol=1e-6, atol=1e-7)
    mine = f.state_from_torch(opt, list(shapes))
    assert set(mine) == set(state)
    for k in state:
        if k != ts_optim.STEP:
            torch.testing.assert_close(state[k], mine[k], rtol=1e-6, atol=1e-7)


def test_unsupported_optimizer_is_named():
    opt = torch.optim.LBFGS([torch.zeros(2, requires_grad=True)])
    with pytest.raises(ts_optim.UnsupportedOptimizer, match="LBFGS is not supported; supported: "
                       "Adadelta, SGD"):
        ts_optim.from_torch(opt)
