#!/usr/bin/env python3
"""Exports and verifies models and optimizers from PyPI packages, unmodified,
as a new user would (issue 35). Not in CI: it installs the packages into a
scratch folder (never the project's environments) and reports, case by
case, rather than asserting.

    scripts/pypi_trials.py [--scratch DIR] [--only NAME,...] [--keep DIR] [--autocast bfloat16]

Run it with the torch 2.x interpreter (scripts/torch2-env.sh prints it) and
TRAINSTEP_BIN set. Each case is a spec written here around the package's
own classes: a small config, an example batch, a loss and an optimizer.
Prints one markdown row per case: ok, FAILED (verify), or the export's
one-line refusal. --autocast bfloat16 exports every case with its forward
and loss under torch.autocast (docs/bf16.md).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

PACKAGES = ["lion-pytorch==0.2.5", "muon-optimizer==0.1.0", "pytorch-optimizer==4.1.0",
            "timm==1.0.31", "torchvision==0.29.2", "transformers==5.25.0", "peft==0.21.2",
            "accelerate==1.16.0"]

CNN = """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, stride=2)
        self.fc1 = torch.nn.Linear(144, 16)
        self.fc2 = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def cnn_spec(make_opt, name):
    torch.manual_seed(5)
    model = Net()
    x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
    return trainstep.TrainSpec(model, torch.nn.functional.cross_entropy, make_opt(model),
                               (x,), y, name=name)
"""

LM = """
class LM(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids).logits


def lm_spec(m, name, vocab=64):
    torch.manual_seed(0)
    model = LM(m)
    ids, y = torch.randint(0, vocab, (2, 8)), torch.randint(0, vocab, (2, 8))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    loss = lambda out, t: torch.nn.functional.cross_entropy(out.transpose(1, 2), t)
    return trainstep.TrainSpec(model, loss, opt, (ids,), y, name=name)
"""

TORCH_OPTIMS = {
    "SGD": "lr=0.05, momentum=0.9", "Adam": "lr=1e-3", "AdamW": "lr=1e-3",
    "Adadelta": "lr=1.0", "Adagrad": "lr=0.01", "Adamax": "lr=2e-3", "ASGD": "lr=0.01",
    "NAdam": "lr=2e-3", "RAdam": "lr=1e-3", "RMSprop": "lr=1e-3", "Rprop": "lr=1e-3",
    "LBFGS": "lr=1.0", "SparseAdam": "lr=1e-3",
}

# name: (preamble, build() body)
CASES = {f"torch.optim.{n}": (CNN, f"return cnn_spec(lambda m: torch.optim.{n}("
                              f"m.parameters(), {kw}), '{n}')")
         for n, kw in TORCH_OPTIMS.items()}
CASES.update({
    "lion-pytorch Lion": (CNN, """
        from lion_pytorch import Lion
        return cnn_spec(lambda m: Lion(m.parameters(), lr=1e-4, weight_decay=1e-2), "lion")"""),
    "muon-optimizer SingleDeviceMuonWithAuxAdam": (CNN, """
        from muon import SingleDeviceMuonWithAuxAdam
        def make(m):
            hidden = [p for p in m.parameters() if p.ndim == 2]
            other = [p for p in m.parameters() if p.ndim != 2]
            return SingleDeviceMuonWithAuxAdam([
                dict(params=hidden, use_muon=True, lr=0.02, weight_decay=0.01),
                dict(params=other, use_muon=False, lr=3e-4, betas=(0.9, 0.95),
                     weight_decay=0.01)])
        return cnn_spec(make, "muon")"""),
})
for opt in ("Lamb", "AdaBelief", "Lion", "AdaBound", "DiffGrad", "MADGRAD"):
    CASES[f"pytorch-optimizer {opt}"] = (CNN, f"""
        import pytorch_optimizer as po
        return cnn_spec(lambda m: po.{opt}(m.parameters(), lr=1e-3), "po_{opt.lower()}")""")
CASES.update({
    "transformers GPT-2": (LM, """
        import transformers as T
        return lm_spec(T.GPT2LMHeadModel(T.GPT2Config(vocab_size=64, n_positions=16, n_embd=32,
                       n_layer=2, n_head=2)), "gpt2")"""),
    "transformers BERT": (LM, """
        import transformers as T
        return lm_spec(T.BertForMaskedLM(T.BertConfig(vocab_size=64, hidden_size=32,
                       num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       max_position_embeddings=16)), "bert")"""),
    "transformers Llama": (LM, """
        import transformers as T
        return lm_spec(T.LlamaForCausalLM(T.LlamaConfig(vocab_size=64, hidden_size=32,
                       intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=16)), "llama")"""),
    "transformers Qwen2": (LM, """
        import transformers as T
        return lm_spec(T.Qwen2ForCausalLM(T.Qwen2Config(vocab_size=64, hidden_size=32,
                       intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=16)), "qwen2")"""),
    "transformers T5": ("", """
        import transformers as T
        torch.manual_seed(0)
        class Seq2Seq(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = T.T5ForConditionalGeneration(T.T5Config(
                    vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                    decoder_start_token_id=0))
            def forward(self, ids, dec):
                return self.m(input_ids=ids, decoder_input_ids=dec, use_cache=False).logits
        model = Seq2Seq()
        ids, dec = torch.randint(0, 64, (2, 8)), torch.randint(0, 64, (2, 6))
        y = torch.randint(0, 64, (2, 6))
        loss = lambda out, t: torch.nn.functional.cross_entropy(out.transpose(1, 2), t)
        return trainstep.TrainSpec(model, loss, torch.optim.AdamW(model.parameters(), lr=1e-3),
                                   (ids, dec), y, name="t5")"""),
    "transformers ViT": ("", """
        import transformers as T
        torch.manual_seed(0)
        class Cls(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = T.ViTForImageClassification(T.ViTConfig(
                    image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                    num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    num_labels=10))
            def forward(self, x):
                return self.m(pixel_values=x).logits
        model = Cls()
        x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
        return trainstep.TrainSpec(model, torch.nn.functional.cross_entropy,
                                   torch.optim.AdamW(model.parameters(), lr=1e-3), (x,), y,
                                   name="vit")"""),
    "transformers GPT-2 labels= (its own loss)": ("", """
        import transformers as T
        torch.manual_seed(0)
        class WithLabels(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=64, n_positions=16,
                                                        n_embd=32, n_layer=2, n_head=2))
            def forward(self, ids, labels):
                return self.m(input_ids=ids, labels=labels, use_cache=False)
        model = WithLabels()
        ids = torch.randint(0, 64, (2, 8))
        return trainstep.TrainSpec(model, lambda out, t: out.loss,
                                   torch.optim.AdamW(model.parameters(), lr=1e-3),
                                   (ids, ids), ids, name="gpt2_labels")"""),
    "peft LoRA (GPT-2)": (LM, """
        import transformers as T
        from peft import LoraConfig, get_peft_model
        torch.manual_seed(0)
        m = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2,
                                           n_head=2))
        m = get_peft_model(m, LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"],
                                         lora_dropout=0.1))
        return lm_spec(m, "lora")"""),
})
for name in ("resnet18", "mobilenetv3_small_050", "vit_tiny_patch16_224", "convnext_atto"):
    CASES[f"timm {name}"] = ("", f"""
        import timm
        torch.manual_seed(0)
        kw = dict(img_size=32) if "vit" in "{name}" else {{}}
        model = timm.create_model("{name}", pretrained=False, num_classes=10, **kw)
        x, y = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
        return trainstep.TrainSpec(model, torch.nn.functional.cross_entropy,
                                   torch.optim.AdamW(model.parameters(), lr=1e-3), (x,), y,
                                   name="{name}")""")


def spec_text(scratch, preamble, body):
    return (f"import sys\nsys.path.insert(0, {scratch!r})\nimport torch\nimport trainstep\n"
            + preamble + "\n\ndef build():\n" + textwrap.indent(textwrap.dedent(body).strip(),
                                                                 "    ") + "\n")


def one_line(text):
    lines = [l for l in text.strip().splitlines() if l.startswith("trainstep")]
    line = (lines or text.strip().splitlines() or ["?"])[-1]
    return line if len(line) < 400 else line[:397] + "..."


def run_case(binary, scratch, folder, name, preamble, body, autocast=None):
    path = os.path.join(folder, "".join(c if c.isalnum() else "_" for c in name) + ".py")
    with open(path, "w") as f:
        f.write(spec_text(scratch, preamble, body))
    art = path[:-3] + ".tstep"
    env = dict(os.environ, TRAINSTEP_PYTHON=sys.executable)
    extra = ["--autocast", autocast] if autocast else []
    p = subprocess.run([binary, "export", path, "--out", art, *extra], capture_output=True,
                       text=True, env=env, timeout=900)
    if p.returncode != 0:
        return "refused", one_line(p.stderr)
    v = subprocess.run([binary, "verify", art, "--threads", "1"], capture_output=True,
                       text=True, timeout=900)
    last = (v.stdout.strip().splitlines() or ["?"])[-1]
    if v.returncode == 0:
        return "ok", p.stdout.strip().splitlines()[-1]
    return "FAILED", last + " " + one_line(v.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scratch", default=os.path.join(tempfile.gettempdir(), "trainstep-pypi"))
    ap.add_argument("--only", default="", help="comma-separated case names (substrings)")
    ap.add_argument("--keep", default=None, help="folder for the specs and artifacts")
    ap.add_argument("--autocast", default=None, choices=["bfloat16"],
                    help="export each case under torch.autocast (export --autocast)")
    a = ap.parse_args()
    binary = os.environ.get("TRAINSTEP_BIN", "trainstep")
    if not os.path.exists(os.path.join(a.scratch, ".installed")):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                        a.scratch, *PACKAGES], check=True)
        open(os.path.join(a.scratch, ".installed"), "w").close()
    folder = a.keep or tempfile.mkdtemp(prefix="trainstep-pypi-specs-")
    os.makedirs(folder, exist_ok=True)
    import torch
    print(f"torch {torch.__version__}; packages: {', '.join(PACKAGES)}"
          + (f"; autocast {a.autocast}" if a.autocast else "") + "\n")
    print("| case | result | detail |\n|---|---|---|")
    only = [s for s in a.only.split(",") if s]
    for name, (pre, body) in CASES.items():
        if only and not any(s in name for s in only):
            continue
        result, detail = run_case(binary, a.scratch, folder, name, pre, body, a.autocast)
        print(f"| {name} | {result} | {detail.replace('|', '/')} |", flush=True)


if __name__ == "__main__":
    main()
