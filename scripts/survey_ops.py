"""Which ATen ops public models' whole training steps trace to, and which
of them the runtime lacks: the survey behind docs/ops_survey.md.

Each model is captured as `trainstep export` would (train_step and
eval_step: forward, loss, backward, optimizer), but no golden trace is
recorded and nothing is written. One row per model: node count, distinct
ops, and the ops `trainstep ops` does not list. Not in CI: it needs
torchvision (Debian: apt install python3-torchvision, for torch 1.13).

  TRAINSTEP_BIN=build/trainstep /usr/bin/python3 scripts/survey_ops.py [--only NAME,...]
"""
import argparse
import collections
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import trainstep  # noqa: E402
from trainstep import capture, exporter as export  # noqa: E402
from trainstep.serialize import serialize_function  # noqa: E402


def _vision(name, size=64, classes=10, **kw):
    def make():
        import torchvision
        model = getattr(torchvision.models, name)(num_classes=classes, **kw)
        x = torch.randn(2, 3, size, size)
        return model, x, torch.randint(0, classes, (2,)), F.cross_entropy
    return make


class _Encoder(nn.Module):
    """A pre-norm transformer classifier from torch.nn's own layers."""

    def __init__(self, vocab=100, d=32, heads=4, layers=2, classes=5, batch_first=True, norm_first=True):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        layer = nn.TransformerEncoderLayer(d, heads, 64, dropout=0.1, batch_first=batch_first,
                                           norm_first=norm_first, activation="gelu")
        self.enc = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens):
        mask = tokens == 0
        h = self.enc(self.emb(tokens), src_key_padding_mask=mask)
        return self.head(h.mean(dim=1))


def _encoder():
    tokens = torch.randint(1, 100, (4, 12))
    tokens[:, -3:] = 0
    return _Encoder(), tokens, torch.randint(0, 5, (4,)), F.cross_entropy


class _GPT(nn.Module):
    """A decoder-only LM as minGPT/nanoGPT write it: learned positions, causal
    scaled_dot_product_attention, GELU MLP, weight tying."""

    def __init__(self, vocab=64, d=32, heads=4, layers=2, T=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(nn.ModuleDict(dict(
            ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), proj=nn.Linear(d, d),
            ln2=nn.LayerNorm(d), fc=nn.Linear(d, 4 * d), out=nn.Linear(4 * d, d)))
            for _ in range(layers))
        self.ln, self.heads = nn.LayerNorm(d), heads
        self.lm = nn.Linear(d, vocab, bias=False)
        self.lm.weight = self.tok.weight

    def forward(self, idx):
        B, T = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            q, k, v = b["qkv"](b["ln1"](x)).split(x.shape[-1], dim=2)
            q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            y = _causal_attention(q, k, v)
            x = x + b["proj"](y.transpose(1, 2).contiguous().view(B, T, -1))
            x = x + b["out"](F.gelu(b["fc"](b["ln2"](x))))
        return self.lm(self.ln(x))


def _causal_attention(q, k, v):
    sdpa = getattr(F, "scaled_dot_product_attention", None)  # torch >= 2.0
    if sdpa is not None:
        return sdpa(q, k, v, is_causal=True)
    T = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return F.softmax(att, dim=-1) @ v


def _vit():
    import torchvision
    model = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                                 num_heads=2, hidden_dim=32, mlp_dim=64,
                                                 num_classes=10)
    return model, torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,)), F.cross_entropy


def _gpt():
    idx = torch.randint(0, 64, (2, 16))
    return _GPT(), idx, torch.randint(0, 64, (2, 16)), \
        lambda out, t: F.cross_entropy(out.view(-1, out.shape[-1]), t.view(-1))


MODELS = {
    "resnet18": _vision("resnet18"),
    "resnet50": _vision("resnet50"),
    "mobilenet_v2": _vision("mobilenet_v2"),
    "mobilenet_v3_small": _vision("mobilenet_v3_small"),
    "efficientnet_b0": _vision("efficientnet_b0"),
    "densenet121": _vision("densenet121"),
    "vgg11_bn": _vision("vgg11_bn"),
    "alexnet": _vision("alexnet", size=64),
    "squeezenet1_1": _vision("squeezenet1_1"),
    "shufflenet_v2_x0_5": _vision("shufflenet_v2_x0_5"),
    "mnasnet0_5": _vision("mnasnet0_5"),
    "regnet_y_400mf": _vision("regnet_y_400mf"),
    "googlenet": _vision("googlenet", aux_logits=False, init_weights=True),
    "convnext_tiny": _vision("convnext_tiny", size=32),
    "swin_t": _vision("swin_t", size=32),
    "vit": _vit,
    "transformer_encoder": _encoder,
    "gpt": _gpt,
}



def survey(name, make, supported):
    torch.manual_seed(0)
    model, x, y, loss = make()
    spec = trainstep.TrainSpec(model, loss, torch.optim.SGD(model.parameters(), lr=0.01,
                                                            momentum=0.9), (x,), y, name=name)
    parts = capture.StepParts(spec)
    ops = collections.Counter()
    for c in (capture.capture_train, capture.capture_eval):
        for n in serialize_function(c(parts))["nodes"]:
            ops[n["op"]] += 1
    return ops, sorted(o for o in ops if o not in supported)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    supported = export.supported_ops()
    names = [n for n in MODELS if not a.only or n in a.only.split(",")]
    print(f"torch {torch.__version__}")
    print("| model | nodes | distinct ops | ops the runtime lacks | capture s |")
    print("|---|---|---|---|---|")
    every = collections.Counter()
    for name in names:
        t0 = time.time()
        try:
            ops, missing = survey(name, MODELS[name], supported)
        except Exception as e:  # a row per model, whatever fails
            print(f"| {name} | - | - | capture fails: {type(e).__name__}: "
                  f"{str(e).splitlines()[0][:200]} | {time.time() - t0:.0f} |", flush=True)
            continue
        every.update(ops.keys())
        print(f"| {name} | {sum(ops.values())} | {len(ops)} | "
              f"{', '.join(f'`{m}`' for m in missing) or 'none'} | {time.time() - t0:.0f} |",
              flush=True)
    print(f"\n{len(every)} distinct ops over the models that captured; "
          f"lacking: {sorted(o for o in every if o not in supported) or 'none'}")


if __name__ == "__main__":
    main()
