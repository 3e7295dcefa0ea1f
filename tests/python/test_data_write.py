"""trainstep.data.write (docs/data.md#from-python): what a training script
has (a torch Dataset of dict samples, a DataLoader, a dict of arrays, a
generator) round-trips through the .npz it writes, and `trainstep train`
reads that file."""
import os

import numpy as np
import pytest
import torch

from conftest import SPECS, run
from trainstep import data


class Mixed(torch.utils.data.Dataset):
    """Dict samples of mixed dtypes, as a tokenizing Dataset gives them."""

    def __init__(self, n=23):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 30, (n, 12), generator=g)
        self.mask = torch.rand(n, 12, generator=g) > 0.3
        self.pixels = torch.randint(0, 256, (n, 2, 3), generator=g).to(torch.uint8)
        self.score = torch.rand(n, generator=g, dtype=torch.float64)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"ids": self.ids[i], "mask": self.mask[i], "image": {"pixels": self.pixels[i]},
                "score": self.score[i], "label": int(i % 3), "weight": 0.5 + i}


def _expected(ds):
    n = len(ds)
    return {"ids": ds.ids.numpy(), "mask": ds.mask.numpy(), "image/pixels": ds.pixels.numpy(),
            "score": ds.score.numpy(), "label": np.arange(n, dtype=np.int64) % 3,
            "weight": (0.5 + np.arange(n)).astype(np.float32)}


def _assert_file(path, want):
    with np.load(path) as f:
        assert sorted(f.files) == sorted(want)
        for k, v in want.items():
            assert f[k].dtype == v.dtype, (k, f[k].dtype, v.dtype)
            np.testing.assert_array_equal(f[k], v, err_msg=k)


def test_dataset_of_dict_samples_round_trips(tmp_path):
    ds = Mixed()
    info = data.write(ds, tmp_path / "d.npz")
    assert info["ids"] == ("int64", [23, 12]) and info["image/pixels"] == ("uint8", [23, 2, 3])
    _assert_file(tmp_path / "d.npz", _expected(ds))
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]  # written, then renamed


@pytest.mark.parametrize("batch", [1, 5, 23, 40])
def test_dataloader_batches_round_trip(tmp_path, batch):
    ds = Mixed()
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=False)
    data.write(loader, tmp_path / "l.npz", compressed=True)
    want = _expected(ds)
    # default_collate turns Python floats into float64 and ints into int64.
    want["weight"] = want["weight"].astype(np.float64)
    _assert_file(tmp_path / "l.npz", want)


def test_dict_of_columns_generator_and_tuples(tmp_path):
    cols = {"a": torch.arange(10), "b": np.ones((10, 2), np.float32)}
    data.write(cols, tmp_path / "c.npz", limit=4)
    _assert_file(tmp_path / "c.npz", {"a": np.arange(4), "b": np.ones((4, 2), np.float32)})
    data.write(({"v": [1.0, 2.0], "n": k} for k in range(6)), tmp_path / "g.npz", limit=5)
    _assert_file(tmp_path / "g.npz", {"v": np.tile(np.float32([1, 2]), (5, 1)),
                                      "n": np.arange(5, dtype=np.int64)})
    # (image, label) pairs, torchvision's form: fields x and y, or names=.
    pairs = [(torch.full((2, 2), float(k)), k) for k in range(3)]
    data.write(pairs, tmp_path / "p.npz")
    _assert_file(tmp_path / "p.npz", {"x": np.stack([np.full((2, 2), k, np.float32) for k in range(3)]),
                                      "y": np.arange(3, dtype=np.int64)})
    data.write(pairs, tmp_path / "q.npz", names=("image", "label"))
    with np.load(tmp_path / "q.npz") as f:
        assert sorted(f.files) == ["image", "label"]


def test_what_cannot_be_written_is_named(tmp_path):
    ragged = [{"ids": torch.zeros(4 + (i == 2), dtype=torch.int64)} for i in range(4)]
    with pytest.raises(data.DataError, match=r"field ids: sample 2 is int64\[5\], sample 0 was int64\[4\]"):
        data.write(ragged, tmp_path / "r.npz")
    # Rows as a Hugging Face dataset gives them: token lists of one length.
    rows = [{"input_ids": [1, 2, 3][:3 - (i == 1)], "label": i} for i in range(3)]
    with pytest.raises(data.DataError, match=r"field input_ids: sample 1 is int64\[2\], sample 0 was "
                                             r"int64\[3\]"):
        data.write(rows, tmp_path / "h.npz")
    with pytest.raises(data.DataError, match="field x of sample 0 is of type object, not numbers"):
        data.write([object()], tmp_path / "o.npz")
    with pytest.raises(data.DataError, match="bfloat16"):
        data.write([torch.zeros(2, dtype=torch.bfloat16)], tmp_path / "b.npz")
    with pytest.raises(data.DataError, match="gave no samples"):
        data.write([], tmp_path / "e.npz")
    with pytest.raises(data.DataError, match="sample 1 has fields"):
        data.write([{"a": 1}, {"b": 1}], tmp_path / "k.npz")
    assert not os.listdir(tmp_path)  # nothing half-written


class Classifier(torch.utils.data.Dataset):
    """specs/data_three_inputs.py's batches, one sample at a time."""

    def __init__(self, n, seed):
        import importlib.util
        s = importlib.util.spec_from_file_location("d3", os.path.join(SPECS, "data_three_inputs.py"))
        m = importlib.util.module_from_spec(s)
        s.loader.exec_module(m)
        self.ids, self.mask, self.types, self.label = m.batch(n, seed)

    def __len__(self):
        return len(self.label)

    def __getitem__(self, i):
        return {"ids": self.ids[i], "mask": self.mask[i], "types": self.types[i],
                "label": self.label[i]}


def test_trainstep_trains_on_what_write_wrote(artifacts, tmp_path):
    art = artifacts("data_three_inputs", os.path.join(SPECS, "data_three_inputs.py"))
    data.write(Classifier(64, 5), tmp_path / "train.npz")
    data.write(torch.utils.data.DataLoader(Classifier(20, 6), batch_size=8), tmp_path / "test.npz")
    out = run("train", art, "--data", f"npz:{tmp_path / 'train.npz'}", "--test-data",
              f"npz:{tmp_path / 'test.npz'}", "--epochs", 2).stdout
    assert "64 train / 20 test samples" in out and "epoch 2:" in out, out


class HFLike:
    """The part of a Hugging Face datasets.Dataset that write() uses (the
    real library is not in the test venv: see docs/data.md): len(),
    column_names, features and with_format("numpy"), whose slices are
    dicts of column arrays. Its rows would also answer ds[i], which the
    columnar path must not need."""

    def __init__(self, columns):
        self.columns, self.features, self.column_names = columns, {}, list(columns)

    def __len__(self):
        return len(next(iter(self.columns.values())))

    def with_format(self, kind):
        assert kind == "numpy"
        cols = self.columns

        class Numpy:
            def __getitem__(self, s):
                assert isinstance(s, slice)
                return {k: (np.array(v[s], dtype=object) if any(len(r) != len(v[0]) for r in v[s])
                            else np.asarray(v[s])) if isinstance(v[0], list) else np.asarray(v[s])
                        for k, v in cols.items()}
        return Numpy()

    def __getitem__(self, i):
        raise AssertionError("read row by row")


@pytest.mark.parametrize("target", ["d.npz", "shards"])
def test_hf_dataset_is_read_in_column_blocks(tmp_path, monkeypatch, target):
    monkeypatch.setattr(data, "HF_BLOCK", 7)
    n = 30
    ids = [[(i * 3 + j) % 50 for j in range(5)] for i in range(n)]
    ds = HFLike({"input_ids": ids, "label": [i % 2 for i in range(n)]})
    info = data.write(ds, tmp_path / target, limit=25)
    assert info == {"input_ids": ("int64", [25, 5]), "label": ("int64", [25])}
    want = {"input_ids": np.array(ids[:25]), "label": np.arange(25) % 2}
    if target == "d.npz":
        _assert_file(tmp_path / target, want)
    else:
        out = tmp_path / "back.npz"
        run("data", f"shards:{tmp_path / target}", "--split", "all", "--write", out, "--count", 25)
        _assert_file(out, want)
    ragged = HFLike({"ids": [[1, 2], [3]]})
    with pytest.raises(data.DataError, match=r"column ids of rows 0\.\.1 holds rows of different lengths"):
        data.write(ragged, tmp_path / "r.npz")


def test_real_hf_dataset_matches_its_rows(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = {"input_ids": [[i, i + 1, i + 2] for i in range(40)], "label": list(range(40)),
            "score": [i / 3 for i in range(40)]}
    ds = datasets.Dataset.from_dict(rows)
    data.write(ds, tmp_path / "c.npz")
    data.write([ds[i] for i in range(len(ds))], tmp_path / "r.npz")  # the row path
    with np.load(tmp_path / "c.npz") as c, np.load(tmp_path / "r.npz") as r:
        for k in rows:
            assert c[k].dtype == r[k].dtype, k
            np.testing.assert_array_equal(c[k], r[k], err_msg=k)
