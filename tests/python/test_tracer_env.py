"""The tracing environment (trainstep/environment.py): while the step is
traced, torch.compiler.is_compiling() is True, so library checks that skip
under a tracer skip; the eager golden run sees False. Tensor literals made
inside forward are graph constants."""
import os

import pytest
import torch

from conftest import SPECS, run

TORCH2 = hasattr(torch, "compiler")


def test_cache_literal_and_tracer_check(tmp_path):
    art = str(tmp_path / "c.tstep")
    p = run("export", os.path.join(SPECS, "cache_model.py"), "--out", art, check=False)
    if not TORCH2:  # no tracer flag in torch 1.13: the check is a value read
        lines = p.stderr.strip().splitlines()
        assert p.returncode != 0 and len(lines) == 1 and "cache_model.py:24" in lines[0]
        return
    assert p.returncode == 0, p.stderr
    v = run("verify", art, "--threads", "1", check=False)
    assert v.returncode == 0 and v.stdout.strip().splitlines()[-1] == "verify: ok", v.stdout


@pytest.mark.skipif(not TORCH2, reason="torch.compiler is 2.x's")
def test_only_the_trace_sees_the_flag():
    import sys
    sys.path.insert(0, SPECS)
    import cache_model
    from trainstep import capture, golden
    spec = cache_model.build()
    seen = []
    spec.model.register_forward_hook(lambda *_: seen.append(torch.compiler.is_compiling()))
    parts = capture.StepParts(spec)
    seen.clear()
    capture.capture_train(parts)
    assert seen and all(seen)
    seen.clear()
    golden.record(parts, steps=1, rounds=0)
    assert seen and not any(seen)
    assert not torch.compiler.is_compiling()


def test_patching_a_symbol_twice_is_refused():
    import math
    from trainstep import environment
    p = environment.Patches().add(math, "sqrt", abs)
    with pytest.raises(ValueError, match="patched twice"):
        p.add(math, "sqrt", abs)
