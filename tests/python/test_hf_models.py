"""Hugging Face models as users build them (transformers and peft, pinned in
the torch 2.x environment), exported and verified against eager PyTorch.

They exercise three things the exporter does for such libraries: a tensor
literal made inside forward (the KV cache's `torch.tensor([])`) is a graph
constant, not state; checks that transformers skips under a tracer
(`padding_mask.all()`) see torch.compiler.is_compiling() True while
tracing, and only then; rotary embeddings' cos and sin. And a model that
returns its own loss (labels=...)."""
import os

import pytest

from conftest import SPECS, run

pytest.importorskip("transformers")
SPEC = os.path.join(SPECS, "hf_models.py")


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama", "lora", "gpt2_labels"])
def test_exports_and_verifies(tmp_path, name):
    if name == "lora":
        pytest.importorskip("peft")
    art = str(tmp_path / f"{name}.tstep")
    p = run("export", SPEC, "--out", art, env={"HF": name}, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    if name == "gpt2_labels":  # the model's own loss: no per-sample split
        assert "eval: the batch's loss" in p.stdout
    v = run("verify", art, "--threads", "1", check=False)
    assert v.returncode == 0 and v.stdout.strip().splitlines()[-1] == "verify: ok", v.stdout
