"""Losses without a per-sample split: a model that returns its own loss (a
0-d output). The eval step reports the batch's loss; evaluation averages
whole batches, weighting each by its size, and says what it left out."""
import os
import re

import torch

from conftest import FASHION, SPECS, read_idx, run

SPEC = os.path.join(SPECS, "model_loss.py")


def test_model_returned_loss_exports_and_verifies(tmp_path):
    art = str(tmp_path / "m.tstep")
    out = run("export", SPEC, "--out", art).stdout
    assert "eval: the batch's loss" in out
    v = run("verify", art, "--threads", "1", check=False)
    assert v.returncode == 0 and "eval batch_loss" in v.stdout, v.stdout
    assert v.stdout.strip().splitlines()[-1] == "verify: ok"


def test_eval_averages_whole_batches(tmp_path, small_data):
    """300 test samples in batches of 64: 4 whole batches (256 samples),
    44 left out. The loss is eager's batch losses averaged."""
    import sys
    sys.path.insert(0, SPECS)
    art = str(tmp_path / "a.tstep")
    run("export", SPEC, "--out", art, env={"ML": "aux"})
    out = run("eval", art, "--data", f"idx:{small_data}", "--threads", 1).stdout
    m = re.search(r"loss ([0-9.]+) \((\d+) samples, (\d+) of a last partial batch left out", out)
    assert m, out
    assert (int(m.group(2)), int(m.group(3))) == (256, 44)
    os.environ["ML"] = "aux"
    try:
        import model_loss
        spec = model_loss.build()
    finally:
        del os.environ["ML"]
    x = torch.from_numpy(read_idx(f"{small_data}/t10k-images-idx3-ubyte.gz").copy()).float()
    y = torch.from_numpy(read_idx(f"{small_data}/t10k-labels-idx1-ubyte.gz").copy()).long()
    x = ((x / 255.0 - 0.1307) / 0.3081).unsqueeze(1)
    spec.model.eval()
    with torch.no_grad():
        losses = [float(model_loss.aux_loss(spec.model(x[i:i + 64]), y[i:i + 64]))
                  for i in range(0, 256, 64)]
    assert abs(float(m.group(1)) - sum(losses) / 4) < 1e-4, (m.group(1), losses)
