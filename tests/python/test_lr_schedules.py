"""LR schedules evaluated in C++ (`trainstep lr-schedule`) against
torch.optim.lr_scheduler: 1,000 values, compared exactly in float64."""
import json
import warnings

import pytest

from conftest import run

N = 1000


def torch_sequence(make, base, n=N):
    """param_groups[0]["lr"] before each of n scheduler.step() calls."""
    import torch
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=base)
    sched = make(opt)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # step() without optimizer.step()
        for _ in range(n):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
    return out


def cli_sequence(spec, base, n=N):
    return json.loads(run("lr-schedule", spec, "--base-lr", repr(base), "--steps", n).stdout)


def S():
    import torch.optim.lr_scheduler as L
    return L


CASES = [
    ("constant", 0.1, lambda o: S().LambdaLR(o, lambda e: 1)),
    ("step:30:0.1", 0.1, lambda o: S().StepLR(o, 30, 0.1)),
    ("step:7:0.7", 0.05, lambda o: S().StepLR(o, 7, 0.7)),
    ("multistep:30,80,80,500:0.1", 0.1, lambda o: S().MultiStepLR(o, [30, 80, 80, 500], 0.1)),
    ("multistep:1,2,3:0.5", 0.3, lambda o: S().MultiStepLR(o, [1, 2, 3], 0.5)),
    ("exp:0.99", 0.1, lambda o: S().ExponentialLR(o, 0.99)),
    ("exp:0.995", 1.7, lambda o: S().ExponentialLR(o, 0.995)),
    ("cosine:1000", 0.1, lambda o: S().CosineAnnealingLR(o, 1000)),
    ("cosine:100:0.001", 0.1, lambda o: S().CosineAnnealingLR(o, 100, 0.001)),  # 5 periods
    ("cosine:333:1e-5", 0.03, lambda o: S().CosineAnnealingLR(o, 333, 1e-5)),
    ("linear:0.1:1:100", 0.1, lambda o: S().LinearLR(o, 0.1, 1.0, 100)),
    ("linear:0.3333333333333333:1:5", 0.01, lambda o: S().LinearLR(o, 1.0 / 3, 1.0, 5)),
    ("linear:1:0.05:700", 0.2, lambda o: S().LinearLR(o, 1.0, 0.05, 700)),
    ("onecycle:0.1:1000", 0.1, lambda o: S().OneCycleLR(o, 0.1, total_steps=1000)),
    ("onecycle:0.5:1200:0.25:10:100:linear", 0.1,
     lambda o: S().OneCycleLR(o, 0.5, total_steps=1200, pct_start=0.25, div_factor=10.0,
                              final_div_factor=100.0, anneal_strategy="linear")),
    ("onecycle:0.02:1001:0.45:25:1e4:cos", 0.1,
     lambda o: S().OneCycleLR(o, 0.02, total_steps=1001, pct_start=0.45)),
    ("seq:linear:0.1:1:100|cosine:900:0.0001:100", 0.1,
     lambda o: S().SequentialLR(o, [S().LinearLR(o, 0.1, 1.0, 100),
                                    S().CosineAnnealingLR(o, 900, 0.0001)], [100])),
    ("seq:linear:0.5:1:10|exp:0.99:50", 0.1,
     lambda o: S().SequentialLR(o, [S().LinearLR(o, 0.5, 1.0, 10), S().ExponentialLR(o, 0.99)],
                                [50])),
    ("seq:linear:0.2:1:20|step:100:0.5|cosine:400:1e-4:20,300", 0.1,
     lambda o: S().SequentialLR(o, [S().LinearLR(o, 0.2, 1.0, 20), S().StepLR(o, 100, 0.5),
                                    S().CosineAnnealingLR(o, 400, 1e-4)], [20, 300])),
    ("seq:exp:0.9|multistep:10,20:0.5|linear:0.25:1:40:5,600", 0.1,
     lambda o: S().SequentialLR(o, [S().ExponentialLR(o, 0.9), S().MultiStepLR(o, [10, 20], 0.5),
                                    S().LinearLR(o, 0.25, 1.0, 40)], [5, 600])),
]


@pytest.mark.parametrize("spec,base,make", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_exactly(spec, base, make):
    pytest.importorskip("torch")
    want = torch_sequence(make, base)
    got = cli_sequence(spec, base)
    assert len(got) == N
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, f"{len(bad)} of {N} differ; first (index, C++, torch): {bad[:3]}"


@pytest.mark.parametrize("spec", [
    "bogus", "step:0:0.1", "step:5", "step:a:0.1", "multistep:30,10:0.1", "exp:",
    "cosine:0", "linear:0:1:10", "linear:0.5:1:10:3", "onecycle:0.1:100:0.3:25:1e4:tri",
    "seq:constant:10", "seq:linear:0.1:1:10|cosine:100:5,6", "seq:onecycle:0.1:100|exp:0.9:10",
])
def test_bad_spec_is_one_line_error(spec):
    p = run("lr-schedule", spec, "--steps", 3, check=False)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("trainstep: bad LR schedule '" + spec + "'"), p.stderr
    assert "expected constant | step:STEP_SIZE:GAMMA" in lines[0]


def test_onecycle_past_total_steps_fails():
    p = run("lr-schedule", "onecycle:0.1:10", "--steps", 12, check=False)
    assert p.returncode == 1 and "TOTAL_STEPS is 10" in p.stderr
