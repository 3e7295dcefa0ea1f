"""Writes the fuzz targets' seed corpus (tests/fuzz/corpus/TARGET/), small
valid inputs the fuzzers mutate. Run from the repo root:
    /usr/bin/python3 tests/fuzz/make_seeds.py [ARTIFACT.tstep [SMALL.tstep ...]]
ARTIFACT (e.g. an export of examples/mnist/spec.py) adds its program JSON,
which holds every op of the MNIST step, to the program seeds, and its steps
as IR text before and after the compiler's passes (`build/trainstep inspect
--ir`, fused ops included) to the ir_text seeds. Each SMALL artifact (e.g.
tests/python/specs/small_cnn.py, tied_lm.py, bn_cnn.py exported) adds its
program as NAME.json, or its eval step alone as NAME_eval_only.json when the
whole does not fit the fuzzer's 64 KiB inputs, and its steps as IR text:
their shapes are small enough that the targets build the kernels and run a
step."""
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import torch  # noqa: E402
from trainstep import safetensors_io  # noqa: E402

OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(OUT, target), exist_ok=True)
    with open(os.path.join(OUT, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def port(name, role, dtype, shape, **extra):
    return {"name": name, "role": role, "dtype": dtype, "shape": shape, **extra}


def node(name, op, inputs, attrs, dtype, shape):
    return {"name": name, "op": op, "inputs": inputs, "attrs": attrs, "outputs": [name],
            "types": [{"dtype": dtype, "shape": shape}]}


# The tiny program of tests/cpp/tiny_artifact.h: y = x @ w, loss = mean(y), w' = w - lr.
TINY = {
    "format": "trainstep", "version": 1, "name": "tiny", "batch_size": 2,
    "optimizer": {"type": "SGD", "lr": 0.5},
    "state": [{"name": "w", "kind": "param", "dtype": "float32", "shape": [4, 3]}],
    "functions": {
        "train_step": {
            "inputs": [port("state/w", "state", "float32", [4, 3], state="w"),
                       port("lr", "lr", "float32", []), port("rng_seed", "rng_seed", "int64", []),
                       port("rng_offset", "rng_offset", "int64", []),
                       port("input0", "input", "float32", [2, 4], index=0),
                       port("target", "target", "int64", [2])],
            "nodes": [node("mm", "aten.mm.default", ["input0", "state/w"], {}, "float32", [2, 3]),
                      node("mean", "aten.mean.default", ["mm"], {"dtype": None}, "float32", []),
                      node("w2", "aten.sub.Tensor", ["state/w", "lr"], {"alpha": 1}, "float32", [4, 3])],
            "outputs": [{"value": "mean", "role": "loss", "dtype": "float32", "shape": []},
                        {"value": "w2", "role": "state", "state": "w", "dtype": "float32",
                         "shape": [4, 3]}]},
        "eval_step": {
            "inputs": [port("state/w", "state", "float32", [4, 3], state="w"),
                       port("input0", "input", "float32", [2, 4], index=0),
                       port("target", "target", "int64", [2])],
            "nodes": [node("mm", "aten.mm.default", ["input0", "state/w"], {}, "float32", [2, 3]),
                      node("sl", "aten.sum.dim_IntList", ["mm"],
                           {"dim": [1], "keepdim": False, "dtype": None}, "float32", [2])],
            "outputs": [{"value": "mm", "role": "output", "index": 0, "dtype": "float32",
                         "shape": [2, 3]},
                        {"value": "sl", "role": "sample_loss", "dtype": "float32", "shape": [2]}]}}}

put("program", "tiny.json", json.dumps(TINY))
if len(sys.argv) > 1:
    _, meta = safetensors_io.load(sys.argv[1])
    prog = json.loads(meta["program"])
    put("program", "mnist.json", json.dumps(prog, separators=(",", ":")))
    # Both steps as the small eval function: every forward op in ~16 KB.
    ev = dict(prog, functions={"train_step": prog["functions"]["eval_step"],
                               "eval_step": prog["functions"]["eval_step"]})
    put("program", "mnist_eval_only.json", json.dumps(ev, separators=(",", ":")))
    bin_ = os.environ.get("TRAINSTEP_BIN", os.path.join(ROOT, "build", "trainstep"))
    for fn, flags, name in (("eval_step", [], "mnist_eval.txt"),
                            ("eval_step", ["--no-fusion", "--no-inplace", "--no-cleanup"],
                             "mnist_eval_plain.txt"),
                            ("train_step", [], "mnist_train.txt")):
        put("ir_text", name, subprocess.check_output([bin_, "inspect", sys.argv[1], "--ir", fn, *flags]))
    for small in sys.argv[2:]:
        _, meta = safetensors_io.load(small)
        prog = json.loads(meta["program"])
        prog.pop("golden", None)  # bytes the fuzzer would only mutate into noise
        for f in prog["functions"].values():
            for n in f["nodes"]:
                n.pop("source", None)
        text = json.dumps(prog, separators=(",", ":"))
        if len(text) <= 65536:
            put("program", prog["name"] + ".json", text)
        else:
            ev = prog["functions"]["eval_step"]
            put("program", prog["name"] + "_eval_only.json", json.dumps(
                dict(prog, functions={"train_step": ev, "eval_step": ev}), separators=(",", ":")))
        # IR text declares input types only: one changed shape re-shapes the
        # whole function, so mutations reach the kernels more often.
        for fn, flags, suffix in (("eval_step", [], "eval"), ("train_step", [], "train"),
                                  ("train_step", ["--no-fusion", "--no-inplace"], "train_plain")):
            ir = subprocess.check_output([bin_, "inspect", small, "--ir", fn, *flags])
            if len(ir) <= 32768:
                put("ir_text", f"{prog['name']}_{suffix}.txt", ir)

# IR text (src/ir/text.h), in the forms the pass tests use.
put("ir_text", "elementwise.txt",
    "func f(%x: float32[2, 3] {role=input}, %w: float32[3] {role=state, state=w}) {\n"
    "  %a = aten.mul.Tensor(%x, %w)\n"
    "  %c = trainstep.constant() {\"dtype\":\"int64\",\"value\":1,\"wrapped\":true}\n"
    "  %b = aten.add.Tensor(%a, %c)\n"
    "  %r = aten.relu.default(%b)\n"
    "  %y = aten.sum.dim_IntList(%r) {\"dim\":[1],\"dtype\":null,\"keepdim\":false}\n"
    "  %e = aten.exp.default(%w)\n"
    "  return %y {role=output}, %e {role=state, state=w}\n"
    "}\n")
put("ir_text", "pool.txt",
    "func f(%x: float32[1, 1, 4, 4] {role=input}) {\n"
    "  %p.0, %p.1 = aten.max_pool2d_with_indices.default(%x) {\"ceil_mode\":false,"
    "\"dilation\":[1,1],\"kernel_size\":[2,2],\"padding\":[0,0],\"stride\":[]}\n"
    "  %v = aten.view.default(%p.0) {\"size\":[4]}\n"
    "  %y = aten._to_copy.default(%p.1) {\"dtype\":\"float32\"}\n"
    "  return %v {role=output}, %y {role=output, index=1}\n"
    "}\n")
put("ir_text", "random.txt",
    "func f(%s: int64[] {role=rng_seed}, %o: int64[] {role=rng_offset}) {\n"
    "  %a = trainstep.philox_uniform.default(%s, %o) {\"key\":0,\"shape\":[4]}\n"
    "  %n = aten.div.Tensor(%a, %a)\n"
    "  %y = aten.where.self(%a, %a, %n)\n"
    "  return %y {role=output}\n"
    "}\n")
put("ir_text", "mm.txt",
    "func f(%x: float32[2, 4] {role=input}, %w: float32[4, 3] {role=state, state=w}) {\n"
    "  %t = aten.t.default(%w)\n"
    "  %u = aten.t.default(%t)\n"
    "  %m = aten.mm.default(%x, %u)\n"
    "  %y = aten.mean.default(%m) {\"dtype\":null}\n"
    "  return %y {role=loss}\n"
    "}\n")


def safetensors_bytes(tensors, meta):
    path = os.path.join(OUT, "tmp.safetensors")
    safetensors_io.save(path, tensors, meta)
    data = open(path, "rb").read()
    os.remove(path)
    return data


def without_checksums(data):
    """The same file as written before checksums: a mutated data byte then
    reaches the parser's later checks instead of failing the checksum."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header["__metadata__"] = safetensors_io.without_checksums(header["__metadata__"])
    if not header["__metadata__"]:
        del header["__metadata__"]
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + n:]


def put_both(target, name, data):
    put(target, name, data)
    put(target, "legacy_" + name, without_checksums(data))


put_both("safetensors", "three.safetensors", safetensors_bytes(
    {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.tensor([1, -2], dtype=torch.int64),
     "c": torch.tensor([True, False, True])}, {"k": "v"}))
put_both("safetensors", "empty.safetensors", safetensors_bytes({}, {}))
put_both("safetensors", "scalar.safetensors", safetensors_bytes({"s": torch.tensor(2.5, dtype=torch.float64)}, {}))

CKPT_META = {"format": "trainstep-checkpoint", "format_version": "1", "model": "tiny",
             "step": "12", "seed": "3", "lr": "0.5", "nonfinite_skips": "1", "epoch": "1",
             "data_position": "4", "base_lr": "0.5", "lr_schedule": "step:1:0.7",
             "lr_schedule_unit": "epoch", "epoch_loss_sum": "2.5", "epoch_loss_count": "3"}
w = torch.arange(12, dtype=torch.float32).reshape(4, 3) / 10
put_both("checkpoint", "tiny.ckpt", safetensors_bytes({"w": w}, CKPT_META))
put_both("checkpoint", "per_step.ckpt", safetensors_bytes({"w": w}, dict(
    CKPT_META, lr_schedule="seq:linear:0.1:1:100|cosine:900:0:100", lr_schedule_unit="step")))


def idx_bytes(arr):
    header = bytes([0, 0, 8, arr.dim()]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    return header + bytes(arr.flatten().tolist())


images = torch.arange(3 * 2 * 2, dtype=torch.uint8).reshape(3, 2, 2)
put("idx", "images.idx", idx_bytes(images))
put("idx", "images.idx.gz", gzip.compress(idx_bytes(images), mtime=0))
put("idx", "labels.idx", idx_bytes(torch.tensor([1, 0, 9], dtype=torch.uint8)))


# A shard folder's index.json and a shard, as trainstep.data.write writes them.
SHARD_META = {"format": "trainstep-shard", "first_sample": "0", "samples": "3"}
shard = safetensors_bytes({"ids": torch.arange(6).reshape(3, 2), "label/y": torch.tensor([0.5, 1.0, -2.0])},
                          SHARD_META)
put("shards", "shard-000000.safetensors", shard)
put("shards", "index.json", json.dumps({
    "format": "trainstep-shards", "version": 1, "complete": True,
    "fields": [{"name": "ids", "dtype": "int64", "shape": [2]}, {"name": "label/y", "dtype": "float32", "shape": []}],
    "shards": [{"file": "shard-000000.safetensors", "samples": 3, "header_checksum": "0123456789abcdef"}]}, indent=1))

# Image seeds need PIL (the torch 2.x venv has it): small JPEGs (4:2:0,
# 4:4:4, greyscale, progressive) and PNGs (RGB, grey, palette, RGBA,
# 16-bit, interlaced).
try:
    import io
    import numpy as np
    from PIL import Image
except ImportError:
    print("make_seeds.py: no PIL here, image seeds left as they are")
else:
    rng = np.random.default_rng(0)
    px = (np.mgrid[0:9, 0:13].sum(0)[..., None] * [9, 5, 3] + rng.integers(0, 40, (9, 13, 3))) % 256
    rgb = Image.fromarray(px.astype(np.uint8))

    def image_bytes(img, fmt, **kw):
        b = io.BytesIO()
        img.save(b, format=fmt, **kw)
        return b.getvalue()
    put("image", "rgb420.jpg", image_bytes(rgb, "JPEG", quality=80))
    put("image", "rgb444.jpg", image_bytes(rgb, "JPEG", quality=95, subsampling=0))
    put("image", "grey.jpg", image_bytes(rgb.convert("L"), "JPEG"))
    put("image", "progressive.jpg", image_bytes(rgb, "JPEG", progressive=True))
    put("image", "rgb.png", image_bytes(rgb, "PNG"))
    put("image", "grey.png", image_bytes(rgb.convert("L"), "PNG"))
    put("image", "palette.png", image_bytes(rgb.convert("P"), "PNG"))
    put("image", "rgba.png", image_bytes(rgb.convert("RGBA"), "PNG"))
    put("image", "deep.png", image_bytes(Image.fromarray((px[..., 0] * 257).astype(np.uint16)), "PNG"))
    put("image", "interlaced.png", image_bytes(rgb, "PNG", interlace=1))
