"""timm's models, unmodified, export and verify at the default tolerance
(torch 2.x: timm is pinned in its test environment)."""
import os

import pytest

from conftest import SPECS, run

timm = pytest.importorskip("timm")
SPEC = os.path.join(SPECS, "timm_models.py")


# resnet18 verifies too (scripts/pypi_trials.py), but takes 130 s here: not in CI.
@pytest.mark.parametrize("name", ["mobilenetv3_small_050", "vit_tiny_patch16_224", "convnext_atto"])
def test_timm_model_exports_and_verifies(tmp_path, name):
    art = str(tmp_path / f"{name}.tstep")
    run("export", SPEC, "--out", art, env={"TIMM": name})
    v = run("verify", art, "--threads", "1", check=False)
    assert v.returncode == 0 and v.stdout.strip().splitlines()[-1] == "verify: ok", \
        [line for line in v.stdout.splitlines() if "MISMATCH" in line] or v.stdout[-2000:]
