"""trainstep.data.write to a folder of shards, and `--data shards:DIR`
(docs/data.md#shards): the shards hold what was written; a model trains
from them to the very state it reaches from the same samples in an .npz;
a corrupt shard is one error naming the file and its samples; a folder
still being written opens with the shards finished so far."""
import json
import os
import re

import numpy as np
import pytest
import torch

from conftest import SPECS, run
from test_data_write import Classifier, Mixed, _expected
from trainstep import data


def _read_back(tmp_path, folder, n):
    out = tmp_path / "back.npz"
    run("data", f"shards:{folder}", "--split", "all", "--write", out, "--count", n)
    return np.load(out)


def test_dataset_round_trips_through_shards(tmp_path):
    ds = Mixed(n=23)
    info = data.write(ds, tmp_path / "s", shard_size=5)
    # The shard reader has no float16 or uint16 etc.; these keep their dtypes.
    assert info["ids"] == ("int64", [23, 12]) and info["image/pixels"] == ("uint8", [23, 2, 3])
    index = json.loads((tmp_path / "s" / "index.json").read_text())
    assert index["complete"] and [s["samples"] for s in index["shards"]] == [5, 5, 5, 5, 3]
    got = _read_back(tmp_path, tmp_path / "s", 23)
    for k, v in _expected(ds).items():
        assert got[k].dtype == v.dtype, k
        np.testing.assert_array_equal(got[k], v, err_msg=k)


def test_dataloader_and_widened_dtypes(tmp_path):
    ds = Mixed(n=11)
    data.write(torch.utils.data.DataLoader(ds, batch_size=4), tmp_path / "l", shard_size=3, limit=10)
    got = _read_back(tmp_path, tmp_path / "l", 10)
    np.testing.assert_array_equal(got["ids"], ds.ids[:10].numpy())
    cols = {"h": np.arange(6, dtype=np.float16).reshape(3, 2), "u": np.array([1, 65535, 7], np.uint16),
            "w": np.array([1, 2 ** 32 - 1, 3], np.uint32), "s": np.array([-1, 2, 3], np.int8)}
    data.write(cols, tmp_path / "c")
    got = _read_back(tmp_path, tmp_path / "c", 3)
    for k, dtype in [("h", np.float32), ("u", np.int32), ("w", np.int64), ("s", np.int32)]:
        assert got[k].dtype == dtype, k
        np.testing.assert_array_equal(got[k], cols[k].astype(dtype), err_msg=k)


def test_a_rewrite_drops_the_old_shards(tmp_path):
    data.write({"a": np.arange(10)}, tmp_path / "r", shard_size=2)
    data.write({"a": np.arange(3)}, tmp_path / "r", shard_size=2)
    assert sorted(os.listdir(tmp_path / "r")) == ["index.json", "shard-000000.safetensors",
                                                  "shard-000001.safetensors"]
    np.testing.assert_array_equal(_read_back(tmp_path, tmp_path / "r", 3)["a"], np.arange(3))


def test_trains_as_from_the_same_npz(tmp_path, artifacts):
    art = artifacts("data_three_inputs", os.path.join(SPECS, "data_three_inputs.py"))
    ds = Classifier(100, seed=4)
    data.write(ds, tmp_path / "d.npz")
    data.write(ds, tmp_path / "d", shard_size=7)
    a, b = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
    common = ["--epochs", 2, "--seed", 2, "--threads", 1]
    out = run("train", art, "--data", f"npz:{tmp_path / 'd.npz'}", "--save", a, *common).stdout
    out_s = run("train", art, "--data", f"shards:{tmp_path / 'd'}", "--save", b, "--data-threads", 2,
                *common).stdout
    assert "90 train / 10 test samples" in out_s, out_s
    def losses(text):
        return re.findall(r"train loss [0-9.]+, test loss [0-9.]+", text)
    assert len(losses(out)) == 2 and losses(out) == losses(out_s), (out, out_s)
    from trainstep import checkpoint
    ma, oa, _ = checkpoint.load(str(a))
    mb, ob, _ = checkpoint.load(str(b))
    for k in {**ma, **oa}:
        assert torch.equal({**ma, **oa}[k], {**mb, **ob}[k]), k


def _flip_a_byte(path, from_end):
    raw = bytearray(path.read_bytes())
    raw[len(raw) - from_end] ^= 0x10
    path.write_bytes(bytes(raw))


def test_a_corrupt_shard_names_the_file_and_its_samples(tmp_path, artifacts):
    art = artifacts("data_three_inputs", os.path.join(SPECS, "data_three_inputs.py"))
    data.write(Classifier(60, seed=5), tmp_path / "d", shard_size=20)
    shard = tmp_path / "d" / "shard-000001.safetensors"
    _flip_a_byte(shard, 3)  # in the last field's data
    r = run("train", art, "--data", f"shards:{tmp_path / 'd'}", "--epochs", 1, check=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"{shard} (samples 20..39): field" in r.stderr and "is corrupt: checksum" in r.stderr, r.stderr
    # A header flipped is caught at open, against the shard's header checksum.
    data.write(Classifier(60, seed=5), tmp_path / "e", shard_size=20)
    raw = (tmp_path / "e" / "shard-000002.safetensors").read_bytes().replace(b'"samples":"20"', b'"samples":"21"')
    (tmp_path / "e" / "shard-000002.safetensors").write_bytes(raw)
    r = run("data", f"shards:{tmp_path / 'e'}", check=False)
    assert "shard-000002.safetensors (samples 40..59): the header is corrupt" in r.stderr, r.stderr
    os.remove(tmp_path / "e" / "shard-000002.safetensors")
    r = run("data", f"shards:{tmp_path / 'e'}", check=False)
    assert "shard-000002.safetensors: No such file" in r.stderr and "index.json" in r.stderr, r.stderr


def test_a_folder_being_written_opens_with_its_finished_shards(tmp_path):
    folder = tmp_path / "live"
    seen = []

    def samples():
        for i in range(25):
            if i == 22:  # two shards of 10 are finished, the third is in memory
                seen.append(run("data", f"shards:{folder}", "--split", "all", "--time").stdout)
            yield {"v": np.full(3, i, np.int32)}
    data.write(samples(), folder, shard_size=10)
    assert "20 samples in 2 shards, so far: the writer has not finished" in seen[0], seen[0]
    assert "read 20 samples" in seen[0], seen[0]
    out = run("data", f"shards:{folder}", "--split", "all").stdout
    assert "25 samples in 3 shards)" in out, out


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(data.DataError, match="compressed= is for a .npz"):
        data.write({"a": np.arange(3)}, tmp_path / "x", compressed=True)
    with pytest.raises(data.DataError, match="shard_size= is for a folder"):
        data.write({"a": np.arange(3)}, tmp_path / "x.npz", shard_size=2)
    with pytest.raises(data.DataError, match="gave no samples"):
        data.write([], tmp_path / "empty")
    assert not os.listdir(tmp_path)
    r = run("data", f"shards:{tmp_path}", check=False)
    assert f"{tmp_path}/index.json: no such file" in r.stderr, r.stderr
