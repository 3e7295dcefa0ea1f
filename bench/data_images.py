#!/usr/bin/env python3
"""Image-folder loading: trainstep's `images:DIR:SIZE` reader against
torchvision's ImageFolder + DataLoader, on the same JPEG files, in one run.

    bench/data_images.py [--threads 1,2] [--repeats 3] [--n64 5000] [--n224 800]
                         [--dir DIR] [--json FILE]

Run it with a Python that has torch, torchvision and PIL (else it re-runs
itself under scripts/find-python.sh's choice).

Makes two ImageFolder trees of JPEGs (PIL, quality 90, 10 classes; smooth
gradients, a few shapes and noise of sigma 8: ~55 KB per 500x375 file, half an
ImageNet file's ~110 KB, where pure noise would decode far slower), in a temp
dir or in --dir (reused when its counts match): case "64", 64x64 sources
cropped to 64, and case "224", 500x375 sources (ImageNet's typical size)
cropped to 224. The defaults take about 2.5 minutes on 2 cores (40 s of it
making the files). Every image is one training read: decode,
RandomResizedCrop(SIZE) (scale 0.08-1, ratio 3/4-4/3), random horizontal flip,
ImageNet Normalize, float32 CHW.

trainstep: `trainstep data images:DIR:SIZE --split all --mode train --time
--threads N`, its own samples/s (thread start to join; each thread decodes into
its own buffer; process start and the directory scan are outside it).
torchvision: ImageFolder(DIR, transform=Compose([RandomResizedCrop(SIZE),
RandomHorizontalFlip(), ToTensor(), Normalize(mean, std)])) iterated fully by
DataLoader(batch_size=32, shuffle=False, num_workers=N, persistent_workers);
one untimed epoch starts and warms the workers, then whole epochs are timed
from iter() to the last batch (collation into batches and the transfer to the
main process are in; worker start-up is not). num_workers=0 (the main process
alone, torch.set_num_threads(1)) is a reference line. One warm-up trainstep
read fills the page cache first. Each of --repeats rounds times every loader
once, in turn (the machine's speed drifts); every figure is the best round.
Ratio = trainstep images/s / torchvision images/s at the same N.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
except ImportError:  # the python3 on PATH may lack them: use the project's choice
    py = subprocess.run([os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts",
                                      "find-python.sh")], capture_output=True, text=True).stdout.strip()
    if py and os.path.realpath(py) != os.path.realpath(sys.executable):
        os.execv(py, [py] + sys.argv)
    raise

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision.transforms as T  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import BIN  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLASSES = 10
# case name -> (source width, height, crop SIZE)
CASES = {"64": (64, 64, 64), "224": (500, 375, 224)}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def make_image(rng, w, h):
    """Photo-like enough for JPEG: a smooth colour field, a few shapes, noise."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    x, y = x / w, y / h
    img = np.empty((h, w, 3), np.float32)
    for c in range(3):
        a, b, d, amp, fx, fy, ph = rng.uniform([30, -80, -80, 0, 0.3, 0.3, 0],
                                               [220, 80, 80, 40, 3, 3, 6.3])
        img[..., c] = a + b * x + d * y + amp * np.sin(2 * np.pi * (fx * x + fy * y) + ph)
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(pil)
    for _ in range(rng.integers(2, 6)):
        x0, x1 = sorted(rng.integers(0, w, 2))
        y0, y1 = sorted(rng.integers(0, h, 2))
        fill = tuple(int(v) for v in rng.integers(0, 256, 3))
        kind = rng.integers(3)
        if kind == 0:
            draw.ellipse([x0, y0, x1 + 1, y1 + 1], fill=fill)
        elif kind == 1:
            draw.rectangle([x0, y0, x1 + 1, y1 + 1], fill=fill)
        else:
            draw.polygon([tuple(int(v) for v in rng.integers(0, [w, h])) for _ in range(3)], fill=fill)
    arr = np.asarray(pil, np.float32) + rng.normal(0, 8, (h, w, 3))
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def make_tree(root, case, n):
    """root/case: an ImageFolder tree of n JPEGs; reused when root/case.json matches."""
    w, h, _ = CASES[case]
    tree, stamp = os.path.join(root, case), os.path.join(root, case + ".json")
    want = {"count": n, "width": w, "height": h, "classes": CLASSES, "quality": 90, "noise": 8}
    if os.path.isdir(tree) and os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == want:
                return tree, False
    shutil.rmtree(tree, ignore_errors=True)
    rng = np.random.default_rng(int(case))
    for c in range(CLASSES):
        os.makedirs(os.path.join(tree, f"class{c}"))
    for i in range(n):
        make_image(rng, w, h).save(os.path.join(tree, f"class{i % CLASSES}", f"{i:05d}.jpg"), quality=90)
    with open(stamp, "w") as f:
        json.dump(want, f)
    return tree, True


def trainstep_read(tree, size, threads, mode="train", options=""):
    """(images/s, images) of one `trainstep data --time` read of every file."""
    cmd = [BIN, "data", f"images:{tree}:{size}{options}", "--split", "all", "--mode", mode,
           "--time", "--threads", str(threads)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-4000:]}")
    m = re.search(r"read (\d+) samples in [0-9.]+ s on \d+ threads?: ([0-9.]+) samples/s", p.stdout)
    if not m:
        raise RuntimeError(f"no rate in the output of {' '.join(cmd)}:\n{p.stdout}")
    return float(m.group(2)), int(m.group(1))


def torchvision_loader(tree, size, workers):
    """ImageFolder + DataLoader with the RandomResizedCrop recipe; workers persist."""
    tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    return torch.utils.data.DataLoader(ImageFolder(tree, transform=tf), batch_size=32, shuffle=False,
                                       num_workers=workers, persistent_workers=workers > 0)


def torchvision_epoch(loader):
    """(images/s, images) of one whole epoch, iter() to the last batch."""
    t0 = time.perf_counter()
    n = sum(x.shape[0] for x, _ in loader)
    return n / (time.perf_counter() - t0), n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2", help="trainstep threads = torchvision workers, compared")
    ap.add_argument("--repeats", type=int, default=3, help="timed reads per figure; the best is kept")
    ap.add_argument("--n64", type=int, default=5000, help="images in case 64")
    ap.add_argument("--n224", type=int, default=800, help="images in case 224")
    ap.add_argument("--cases", default="64,224")
    ap.add_argument("--dir", default="", help="where the image trees go (reused when present); "
                    "default: a temp dir, removed at the end")
    ap.add_argument("--json", default="", help="write the figures to this file")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    torch.set_num_threads(1)  # the num_workers=0 line: one thread, as in a DataLoader worker
    root = os.path.abspath(a.dir) if a.dir else tempfile.mkdtemp(prefix="data_images.")
    os.makedirs(root, exist_ok=True)
    t_start, load0 = time.monotonic(), os.getloadavg()[0]
    rows, sizes = [], {}
    try:
        for case in a.cases.split(","):
            n = a.n64 if case == "64" else a.n224
            t0 = time.monotonic()
            tree, made = make_tree(root, case, n)
            w, h, size = CASES[case]
            kb = sum(e.stat().st_size for c in os.scandir(tree) for e in os.scandir(c)) / n / 1e3
            log(f"case {case}: {n} {w}x{h} JPEGs of {kb:.1f} KB on average in {tree} "
                + (f"(made in {time.monotonic() - t0:.1f} s)" if made else "(reused)"))
            sizes[case] = (w, h, kb)
            # Warm-up: the page cache (trainstep), the workers' start and first epoch (torchvision).
            trainstep_read(tree, size, max(threads))
            loaders = {wk: torchvision_loader(tree, size, wk) for wk in [0] + threads}
            for loader in loaders.values():
                torchvision_epoch(loader)
            # Rounds alternate the loaders, so a slow spell of the machine hits both sides.
            runs = {}
            for _ in range(a.repeats):
                for t in threads:
                    runs.setdefault(("trainstep", t), []).append(trainstep_read(tree, size, t))
                for wk, loader in loaders.items():
                    runs.setdefault(("torchvision", wk), []).append(torchvision_epoch(loader))
            del loaders, loader  # stops the workers
            for (name, t), rs in runs.items():
                rate, count = max(rs)
                rows.append({"case": case, "loader": name, "threads": t, "images": count,
                             "images_per_s": rate, "rounds": [x for x, _ in rs]})
                log(f"  {name} {'threads' if name == 'trainstep' else 'num_workers'}={t}: "
                    + ", ".join(f"{x:.1f}" for x, _ in rs) + " images/s")
    finally:
        if not a.dir:
            shutil.rmtree(root, ignore_errors=True)

    tv = {(r["case"], r["threads"]): r["images_per_s"] for r in rows if r["loader"] == "torchvision"}
    for r in rows:
        r["per_thread"] = r["images_per_s"] / max(r["threads"], 1)
        if r["loader"] == "trainstep" and (r["case"], r["threads"]) in tv:
            r["ratio"] = r["images_per_s"] / tv[(r["case"], r["threads"])]
    load1 = os.getloadavg()[0]
    print(f"bench/data_images: {cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"torchvision {torchvision.__version__}, {a.repeats} repeats (best kept), "
          f"{time.monotonic() - t_start:.0f} s, load average {load0:.1f} at the start, {load1:.1f} at the end")
    print("; ".join(f"case {c}: {w}x{h} JPEGs ({kb:.1f} KB on average) -> {CASES[c][2]}"
                    for c, (w, h, kb) in sizes.items()))
    print("threads = trainstep --threads or DataLoader num_workers (0: main process, 1 torch thread); "
          "ratio = trainstep / torchvision at the same N")
    print()
    print("| case | loader | threads/workers | images | images/s | images/s per thread | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else ""
        print(f"| {r['case']} | {r['loader']} | {r['threads']} | {r['images']} | {r['images_per_s']:.1f} | "
              f"{r['per_thread']:.1f} | {ratio} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_model(), "cpus": os.cpu_count(), "torch": torch.__version__,
                       "torchvision": torchvision.__version__, "repeats": a.repeats,
                       "load_average": [load0, load1], "sources": sizes, "rows": rows}, f, indent=1)
        log(f"written {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
