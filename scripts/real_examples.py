#!/usr/bin/env python3
"""Exports and verifies pytorch/examples' models as their authors wrote them
(issue 13). Not in CI: it needs a checkout of pytorch/examples, and it
reports rather than asserts, model by model.

    scripts/real_examples.py EXAMPLES_CHECKOUT [--only NAME,...] [--keep DIR]

The model code is read from the checkout at run time: model files are
imported as they are; from training scripts (vae/main.py, ...) only the
class and function definitions are taken (their top-level code trains, and
imports torchvision), so nothing of theirs is copied here. What this file
adds per model is what a user's spec adds: sizes, an example batch, the
optimizer the example's main uses, and its loss. Run with the interpreter
whose torch you want (Debian's 1.13, or the 2.x venv) and TRAINSTEP_BIN set.
"""
import argparse
import ast
import os
import subprocess
import sys
import tempfile
import textwrap

RECORDED = "77f55b912142e11fcfdf5b530231fb9c52f181e8"  # pytorch/examples main, 2026-12

# name: (file in the checkout, names to take from it or None to import it
# whole, the spec body: build() gets the loaded module as `ex`)
MODELS = {
    "vae": ("vae/main.py", ["VAE", "loss_function"], """
        model = ex.VAE()
        x = torch.rand(16, 1, 28, 28)
        def loss(out, target):
            recon, mu, logvar = out
            return ex.loss_function(recon, target, mu, logvar)
        return trainstep.TrainSpec(model, loss, torch.optim.Adam(model.parameters(), lr=1e-3),
                                   (x,), x.clone())
    """),
    "mnist_rnn": ("mnist_rnn/main.py", ["Net"], """
        model = ex.Net()
        x, y = torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))
        return trainstep.TrainSpec(model, F.nll_loss, torch.optim.Adadelta(model.parameters(), lr=1.0),
                                   (x,), y)
    """),
    "super_resolution": ("super_resolution/model.py", None, """
        model = ex.Net(upscale_factor=3)
        x, y = torch.rand(4, 1, 32, 32), torch.rand(4, 1, 96, 96)
        return trainstep.TrainSpec(model, F.mse_loss, torch.optim.Adam(model.parameters(), lr=0.01),
                                   (x,), y)
    """),
    "fast_neural_style": ("fast_neural_style/neural_style/transformer_net.py", None, """
        model = ex.TransformerNet()
        # The example's loss is a VGG perceptual loss; MSE to a target
        # image stands in (the network's ops are what is under test).
        x, y = torch.rand(2, 3, 32, 32) * 255, torch.rand(2, 3, 32, 32) * 255
        return trainstep.TrainSpec(model, F.mse_loss, torch.optim.Adam(model.parameters(), lr=1e-3),
                                   (x,), y)
    """),
    "word_language_model_lstm": ("word_language_model/model.py", None, """
        ntokens = 50
        rnn = ex.RNNModel("LSTM", ntokens, 16, 16, 2, 0.2)
        class Step(torch.nn.Module):  # the training loop's call: fresh hidden state per batch
            def __init__(self):
                super().__init__()
                self.rnn = rnn
            def forward(self, data):
                return self.rnn(data, self.rnn.init_hidden(data.size(1)))
        model = Step()
        # main.py's get_batch: the target flattened over (seq, batch), as is
        # the model's output; criterion(output, targets)
        data, target = torch.randint(0, ntokens, (35, 8)), torch.randint(0, ntokens, (35 * 8,))
        def loss(out, t):
            return F.nll_loss(out[0], t)
        return trainstep.TrainSpec(model, loss, torch.optim.SGD(model.parameters(), lr=20),
                                   (data,), target, batch_dims=1)
    """),
    "word_language_model_transformer": ("word_language_model/model.py", None, """
        ntokens = 50
        model = ex.TransformerModel(ntokens, 16, 2, 16, 2, 0.2)
        data, target = torch.randint(0, ntokens, (35, 8)), torch.randint(0, ntokens, (35 * 8,))
        def loss(out, t):  # main.py: criterion(output.view(-1, ntokens), targets)
            return F.nll_loss(out.view(-1, ntokens), t)
        return trainstep.TrainSpec(model, loss, torch.optim.SGD(model.parameters(), lr=20),
                                   (data,), target, batch_dims=1)
    """),
    "language_translation": ("language_translation/src/model.py", None, """
        vocab, pad = 40, 1  # src/data.py's special_symbols["<pad>"]
        translator = ex.Translator(1, 1, 16, 2, vocab, vocab, 32, 0.1)
        class Step(torch.nn.Module):  # main.py's train loop: masks as src/data.py's create_mask
            def __init__(self):
                super().__init__()
                self.m = translator
            def forward(self, src, tgt_input):
                s, t = src.shape[0], tgt_input.shape[0]
                causal = torch.full((t, t), float("-inf")).triu(1)
                src_mask = torch.zeros((s, s), dtype=torch.bool)
                src_pad, tgt_pad = (src == pad).transpose(0, 1), (tgt_input == pad).transpose(0, 1)
                return self.m(src, tgt_input, src_mask, causal, src_pad, tgt_pad, src_pad)
        model = Step()
        src, tgt = torch.randint(2, vocab, (9, 4)), torch.randint(2, vocab, (8, 4))
        src[7:, 1], tgt[6:, 2] = pad, pad  # padded sentences
        def loss(logits, t):  # loss_fn(logits.reshape(-1, V), tgt_out.reshape(-1))
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t, ignore_index=pad)
        return trainstep.TrainSpec(model, loss, torch.optim.Adam(model.parameters(), lr=1e-3,
                                   betas=(0.9, 0.98), eps=1e-9), (src, tgt[:-1]),
                                   tgt[1:].reshape(-1), batch_dims=1)
    """),
    "mnist": ("mnist/main.py", ["Net"], """
        model = ex.Net()
        x, y = torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))
        return trainstep.TrainSpec(model, F.nll_loss, torch.optim.Adadelta(model.parameters(), lr=1.0),
                                   (x,), y)
    """),
    # main.py sets nz, ngf, ndf and nc from its arguments at top level.
    "dcgan_generator": ("dcgan/main.py", ["Generator"], """
        ex.nz, ex.ngf, ex.nc = 16, 8, 3
        model = ex.Generator(1)
        z, image = torch.randn(4, 16, 1, 1), torch.rand(4, 3, 64, 64) * 2 - 1
        opt = torch.optim.Adam(model.parameters(), lr=2e-4, betas=(0.5, 0.999))
        return trainstep.TrainSpec(model, F.mse_loss, opt, (z,), image)
    """),
    "dcgan_discriminator": ("dcgan/main.py", ["Discriminator"], """
        ex.ndf, ex.nc = 8, 3
        model = ex.Discriminator(1)
        x, label = torch.rand(4, 3, 64, 64) * 2 - 1, torch.tensor([1.0, 0.0, 1.0, 0.0])
        opt = torch.optim.Adam(model.parameters(), lr=2e-4, betas=(0.5, 0.999))
        loss = lambda out, y: torch.nn.BCELoss()(out.view(-1), y)
        return trainstep.TrainSpec(model, loss, opt, (x,), label)
    """),
    # Graphs: the batch is the nodes, the adjacency matrix dense (the
    # example's torch.spmm takes it either way); the loss over all nodes,
    # as the example's test() computes it.
    "gcn": ("gcn/main.py", ["GraphConv", "GCN"], """
        model = ex.GCN(12, 16, 7)
        n = 20
        adj = (torch.rand(n, n) < 0.2).float() + torch.eye(n)
        adj = adj / adj.sum(1, keepdim=True)
        x, y = torch.rand(n, 12), torch.randint(0, 7, (n,))
        opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
        return trainstep.TrainSpec(model, torch.nn.NLLLoss(), opt, (x, adj), y)
    """),
    "gat": ("gat/main.py", ["GraphAttentionLayer", "GAT"], """
        model = ex.GAT(12, 16, 4, 7, concat=True, dropout=0.6)
        n = 20
        adj = ((torch.rand(n, n) < 0.2) | torch.eye(n, dtype=torch.bool)).long()
        x, y = torch.rand(n, 12), torch.randint(0, 7, (n,))
        opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
        return trainstep.TrainSpec(model, torch.nn.NLLLoss(), opt, (x, adj), y)
    """),
    "time_sequence_prediction": ("time_sequence_prediction/train.py", ["Sequence"], """
        model = ex.Sequence().double()
        x = torch.sin(torch.arange(8 * 40, dtype=torch.double).view(8, 40) / 4)
        return trainstep.TrainSpec(model, torch.nn.MSELoss(), torch.optim.LBFGS(model.parameters(), lr=0.8),
                                   (x[:, :-1],), x[:, 1:])
    """),
}

SPEC = """import sys
import torch
import torch.nn.functional as F
import trainstep
sys.path.insert(0, {src_dir!r})
{load}

def build():
    torch.manual_seed(0)
{body}
"""


def definitions_only(path, names):
    """The imports and the named top-level definitions of a script, as
    source text (its training code and its other imports are left out)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    keep = [n for n in tree.body
            if isinstance(n, (ast.Import, ast.ImportFrom))
            and not any(a.name.split(".")[0] in ("torchvision", "matplotlib", "numpy", "requests")
                        for a in n.names)
            and getattr(n, "module", None) not in ("torchvision", "torchvision.utils")
            or isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name in names]
    return ast.unparse(ast.Module(body=keep, type_ignores=[]))


def spec_text(checkout, name, work):
    rel, names, body = MODELS[name]
    path = os.path.join(checkout, rel)
    if names is None:
        load = (f"import importlib.util\n_s = importlib.util.spec_from_file_location("
                f"'ex_{name}', {path!r})\nex = importlib.util.module_from_spec(_s)\n"
                f"_s.loader.exec_module(ex)")
    else:
        mod = os.path.join(work, f"ex_{name}.py")
        with open(mod, "w") as f:
            f.write(f"# Taken at run time from {path}\n" + definitions_only(path, names) + "\n")
        load = f"import ex_{name} as ex"
    return SPEC.format(src_dir=work if names else os.path.dirname(path), load=load,
                       body=textwrap.indent(textwrap.dedent(body).strip(), "    "))


def run_one(checkout, name, work):
    spec = os.path.join(work, f"spec_{name}.py")
    with open(spec, "w") as f:
        f.write(spec_text(checkout, name, work))
    art = os.path.join(work, f"{name}.tstep")
    binary = os.environ.get("TRAINSTEP_BIN", "trainstep")
    env = dict(os.environ, TRAINSTEP_PYTHON=sys.executable)
    p = subprocess.run([binary, "export", spec, "--out", art], capture_output=True, text=True,
                       env=env, timeout=900)
    if p.returncode != 0:
        return "export fails", (p.stderr.strip() or p.stdout.strip())
    p = subprocess.run([binary, "verify", art], capture_output=True, text=True, timeout=900)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr.strip()
    if p.returncode == 0:
        return "verifies", last
    bad = [l.strip() for l in p.stdout.splitlines() if "MISMATCH" in l][:3]
    return "verify fails", "; ".join(bad) or last


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", help="a pytorch/examples checkout")
    ap.add_argument("--only", help="comma-separated model names: " + ", ".join(MODELS))
    ap.add_argument("--keep", help="write specs and artifacts here (default: a temp dir)")
    a = ap.parse_args()
    head = subprocess.run(["git", "-C", a.checkout, "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    if head != RECORDED:
        print(f"note: checkout is at {head or 'an unknown commit'}, recorded {RECORDED}")
    import torch
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")
    names = a.only.split(",") if a.only else list(MODELS)
    work = a.keep or tempfile.mkdtemp(prefix="real_examples_")
    os.makedirs(work, exist_ok=True)
    for n in names:
        status, detail = run_one(a.checkout, n, work)
        lines = [l.strip() for l in detail.splitlines() if l.strip()]
        print(f"| {n} | {status} | {' / '.join(lines[:4])[:700]} |", flush=True)


if __name__ == "__main__":
    main()
