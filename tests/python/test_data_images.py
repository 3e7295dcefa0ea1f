"""`train --data images:DIR:SIZE` (docs/data.md): an ImageFolder of PNG and
JPEG files written here. Samples are ImageFolder's, in its order; the
crops, flips and eval resizes match torchvision's transforms given the
same parameters; a run resumed mid-epoch ends bit-identical."""
import math
import os

import numpy as np
import pytest
import torch

from conftest import SPECS, run
from test_data_sources import _mix, _resumed_mid_epoch, sample_random

PIL = pytest.importorskip("PIL.Image")
M64 = (1 << 64) - 1
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _folder(root, per_class=14, sizes=(20, 70), seed=0):
    """Three classes of smooth images plus noise, of random sizes: PNG
    (some greyscale or palette), JPEG, upper-case .JPEG, some in a sub-folder,
    and a text file ImageFolder skips."""
    rng = np.random.default_rng(seed)
    for c in ["ant", "bee", "cow"]:
        os.makedirs(root / c / "more", exist_ok=True)
        for k in range(per_class):
            h, w = (int(v) for v in rng.integers(*sizes, size=2))
            yy, xx = np.mgrid[0:h, 0:w]
            base = np.stack([xx * 255 // w, yy * 255 // h, (xx * yy) % 256], -1)
            px = np.clip(base + rng.integers(0, 50, (h, w, 3)), 0, 255).astype(np.uint8)
            img = PIL.fromarray(px)
            ext = ["png", "jpg", "JPEG"][k % 3]
            if k % 7 == 2:
                img = img.convert("L")
            elif k % 4 == 0 and ext == "png":
                img = img.convert("P")
            where = root / c / ("more" if k % 4 == 3 else "")
            img.save(where / f"{k:02d}.{ext}", format="PNG" if ext == "png" else "JPEG",
                     quality=90)
        (root / c / "notes.txt").write_text("not an image")


class _Rng:
    """data/image_transform.h's SampleRng, replayed."""

    def __init__(self, seed):
        self.s = seed

    def next(self):  # splitmix64: mix the state, then advance it
        z = _mix(self.s)
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        return z

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53

    def below(self, n):
        return self.next() % n


def _crop_params(h, w, rng, scale, ratio, flip):
    """torchvision's RandomResizedCrop.get_params, drawing from rng."""
    area, lo, hi = h * w, math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * (scale[0] + (scale[1] - scale[0]) * rng.uniform())
        aspect = math.exp(lo + (hi - lo) * rng.uniform())
        cw, ch = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < cw <= w and 0 < ch <= h:
            top, left = rng.below(h - ch + 1), rng.below(w - cw + 1)
            break
    else:
        r = w / h
        if r < min(ratio):
            cw, ch = w, round(w / min(ratio))
        elif r > max(ratio):
            ch, cw = h, round(h * max(ratio))
        else:
            cw, ch = w, h
        top, left = (h - ch) // 2, (w - cw) // 2
    return top, left, ch, cw, rng.uniform() < flip


def _written(tmp_path, spec, *args):
    out = tmp_path / "samples.npz"
    run("data", spec, "--write", out, *args)
    return np.load(out)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("images") / "f"
    _folder(root)
    return root


def test_train_crops_match_torchvision(folder, tmp_path):
    tv = pytest.importorskip("torchvision")
    from torchvision.transforms import functional as F
    ds = tv.datasets.ImageFolder(str(folder))
    train = [i for i in range(len(ds)) if i % 10 != 9]
    for opts, scale, ratio, flip, mean, std, seed, epoch in [
            ("", (0.08, 1.0), (3 / 4, 4 / 3), 0.5, MEAN, STD, 0, 0),
            (":scale=0.5,0.9:ratio=0.5,2:flip=1:mean=0.5,0.5,0.5:std=0.25,0.5,1",
             (0.5, 0.9), (0.5, 2.0), 1.0, [0.5] * 3, [0.25, 0.5, 1.0], 7, 3)]:
        size = 24
        got = _written(tmp_path, f"images:{folder}:{size}{opts}", "--count", len(train),
                       "--seed", seed, "--epoch", epoch)
        assert got["x"].shape == (len(train), 3, size, size)
        for i, k in enumerate(train):
            img, label = ds[k]
            assert got["y"][i] == label
            t = F.to_tensor(img)
            rng = _Rng(sample_random(seed, epoch, i))
            top, left, h, w, flipped = _crop_params(t.shape[1], t.shape[2], rng, scale, ratio, flip)
            ref = F.resized_crop(t, top, left, h, w, [size, size], antialias=True)
            ref = F.normalize(F.hflip(ref) if flipped else ref, mean, std)
            # Float rounding only: one sum order against another.
            torch.testing.assert_close(torch.from_numpy(got["x"][i]), ref, rtol=0, atol=2e-5,
                                       msg=f"sample {i} ({ds.samples[k][0]}) {opts}")


def test_eval_resize_and_centre_crop_match_torchvision(folder, tmp_path):
    tv = pytest.importorskip("torchvision")
    from torchvision.transforms import functional as F
    ds = tv.datasets.ImageFolder(str(folder))
    test = [i for i in range(len(ds)) if i % 10 == 9]
    # resize=20 < 24: images smaller than the crop are padded with zeros, as CenterCrop pads.
    for size, resize in [(24, 27), (24, 20), (32, 80)]:
        got = _written(tmp_path, f"images:{folder}:{size}:resize={resize}", "--split", "test")
        assert len(got["x"]) == len(test)
        for i, k in enumerate(test):
            img, label = ds[k]
            assert got["y"][i] == label
            ref = F.resize(F.to_tensor(img), resize, antialias=True)
            ref = F.normalize(F.center_crop(ref, [size, size]), MEAN, STD)
            torch.testing.assert_close(torch.from_numpy(got["x"][i]), ref, rtol=0, atol=2e-5,
                                       msg=f"test sample {i}, size {size}, resize {resize}")


def test_pil_pipeline_differs_by_its_uint8_rounding_only(folder, tmp_path):
    """ImageFolder's usual transforms resize the PIL image in uint8: within
    a unit of its last place (1/255) before Normalize's division by std."""
    tv = pytest.importorskip("torchvision")
    T = tv.transforms
    ds = tv.datasets.ImageFolder(str(folder), transform=T.Compose(
        [T.Resize(27), T.CenterCrop(24), T.ToTensor(), T.Normalize(MEAN, STD)]))
    got = _written(tmp_path, f"images:{folder}:24:resize=27", "--split", "all", "--mode", "eval",
                   "--count", len(ds))
    for i in range(len(ds)):
        err = (torch.from_numpy(got["x"][i]) - ds[i][0]).abs() * torch.tensor(STD).view(3, 1, 1)
        assert err.max() <= 1.01 / 255, (i, err.max())


def test_image_cnn_resume_is_bit_identical(folder, artifacts, tmp_path):
    art = artifacts("data_image_cnn", os.path.join(SPECS, "data_image_cnn.py"))
    # 42 images, 38 train: 5 batches of 8 an epoch.
    out = _resumed_mid_epoch(art, ["--data", f"images:{folder}:16"], tmp_path, every=3,
                             resume_step=6)
    assert "test loss" in out and "accuracy" in out, out


def test_reads_do_not_depend_on_threads_or_order(folder, tmp_path):
    spec = f"images:{folder}:16"
    whole = _written(tmp_path, spec, "--count", 30, "--seed", 5, "--epoch", 1)
    part = _written(tmp_path, spec, "--first", 10, "--count", 5, "--seed", 5, "--epoch", 1)
    assert np.array_equal(whole["x"][10:15], part["x"])
    other_epoch = _written(tmp_path, spec, "--count", 30, "--seed", 5, "--epoch", 2)
    assert not np.array_equal(whole["x"], other_epoch["x"])


def test_bad_folders_are_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run("data", f"images:{tmp_path / 'empty'}:16", check=False)
    assert r.returncode != 0 and "no class folders" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "f" / "a").mkdir(parents=True)
    (tmp_path / "f" / "a" / "x.bmp").write_bytes(b"BM")
    r = run("data", f"images:{tmp_path / 'f'}:16", check=False)
    assert r.returncode != 0 and "x.bmp: only JPEG and PNG" in r.stderr, r.stderr
    (tmp_path / "f" / "a" / "x.bmp").unlink()
    (tmp_path / "f" / "a" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    (tmp_path / "f" / "a" / "fake.jpg").write_bytes(b"GIF89a")
    r = run("data", f"images:{tmp_path / 'f'}:16", "--time", check=False)
    assert r.returncode != 0 and "broken.png" in r.stderr, r.stderr
    r = run("data", f"images:{tmp_path / 'f'}:16", "--first", 1, "--count", 1, "--time", check=False)
    assert "fake.jpg: neither a JPEG nor a PNG" in r.stderr, r.stderr
    r = run("data", f"images:{tmp_path / 'f'}:16:scale=2,1", check=False)
    assert "scale needs 0 < LO <= HI <= 1" in r.stderr, r.stderr
    r = run("data", f"images:{tmp_path / 'f'}:sixteen", check=False)
    assert "SIZE 'sixteen' is not a positive integer" in r.stderr, r.stderr
