import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import pytest  # noqa: E402
import torch  # noqa: E402

from trainstep import safetensors_io as st  # noqa: E402


def raw(header, data=b""):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def sample():
    return {
        "w": torch.randn(3, 4),
        "d": torch.arange(5, dtype=torch.float64) / 3,
        "step": torch.tensor([1 << 40, -7], dtype=torch.int64),
        "i": torch.tensor([[1, -2], [3, 2**31 - 1]], dtype=torch.int32),
        "u": torch.arange(250, 256, dtype=torch.uint8),
        "mask": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "bscalar": torch.tensor(True),
        "empty": torch.empty(0, 7),
        "empty_i": torch.zeros(2, 0, dtype=torch.int64),
    }


def assert_same(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert a[k].shape == b[k].shape, k
        assert torch.equal(a[k], b[k]), k


def test_round_trip_every_dtype(tmp_path):
    tensors = sample()
    path = tmp_path / "m.safetensors"
    st.save(path, tensors, {"format": "pt", "epoch": "3"})
    got, meta = st.load(path)
    assert st.has_checksums(meta)
    assert st.without_checksums(meta) == {"format": "pt", "epoch": "3"}
    assert_same(got, tensors)
    assert list(got) == list(tensors)  # file order = write order
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]


def test_bytes_round_trip_and_layout():
    tensors = sample()
    data = st.dumps(tensors)
    (n,) = struct.unpack_from("<Q", data)
    assert (8 + n) % 8 == 0
    header = json.loads(data[8:8 + n])
    assert set(header["__metadata__"]) == {"checksum_algorithm", "tensor_checksums", "header_checksum"}
    assert header["scalar"]["shape"] == []
    got, meta = st.loads(data)
    assert st.without_checksums(meta) == {}
    assert_same(got, tensors)
    # Loaded tensors own writable memory.
    got["w"].add_(1)


def test_non_contiguous_input():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    got, _ = st.loads(st.dumps({"t": t}))
    assert torch.equal(got["t"], t)


def test_no_tensors():
    got, meta = st.loads(st.dumps({}, {"a": "b"}))
    assert got == {} and st.without_checksums(meta) == {"a": "b"}


def test_dumps_rejects_bad_input():
    with pytest.raises(ValueError, match="unsupported dtype"):
        st.dumps({"h": torch.zeros(2, dtype=torch.float16)})
    with pytest.raises(ValueError, match="cannot be a tensor name"):
        st.dumps({"__metadata__": torch.zeros(1)})
    with pytest.raises(ValueError, match="must be str"):
        st.dumps({}, {"epoch": 3})


def test_hand_written_file_any_key_order():
    data = b"\x01\x00\x00\x00" + struct.pack("<q", 42)
    got, _ = st.loads(raw({"a": {"dtype": "I64", "shape": [], "data_offsets": [4, 12]},
                           "b": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}, data))
    assert list(got) == ["b", "a"]
    assert got["a"].item() == 42


U8_1 = {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}

BAD = [
    (b"\x00" * 5, "too short"),
    (struct.pack("<Q", 1 << 32) + b"{}", "exceeds the 100 MiB limit"),
    (struct.pack("<Q", 100) + b"{}", "truncated: header says 100 bytes"),
    (raw(b'{"a":'), "not valid JSON"),
    (raw(b"\xff\xfe"), "not valid JSON"),
    (raw([1, 2]), "not a JSON object"),
    (raw({"a": 3}), "entry is not a JSON object"),
    (raw({"a": {"dtype": "F32", "shape": []}}), 'missing "data_offsets"'),
    (raw({"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}, b"xx"), "unknown dtype 'F16'"),
    (raw({"a": {"dtype": "float32", "shape": [1], "data_offsets": [0, 4]}}, b"xxxx"), "unknown dtype"),
    (raw({"a": {"dtype": "U8", "shape": 3, "data_offsets": [0, 3]}}, b"xxx"), "shape is not a list"),
    (raw({"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}}), "non-negative integers"),
    (raw({"a": {"dtype": "U8", "shape": [1.5], "data_offsets": [0, 0]}}), "non-negative integers"),
    (raw({"a": {"dtype": "U8", "shape": [True], "data_offsets": [0, 1]}}, b"x"), "non-negative integers"),
    (raw({"a": {"dtype": "U8", "shape": [1] * 17, "data_offsets": [0, 1]}}, b"x"), "rank 17 exceeds"),
    (raw({"a": {"dtype": "U8", "shape": [1 << 32, 1 << 32], "data_offsets": [0, 0]}}),
     "overflows the element count"),
    (raw({"a": {"dtype": "F64", "shape": [1 << 61], "data_offsets": [0, 0]}}), "overflows the byte size"),
    (raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"xxxx"),
     r"size mismatch: F32\[2\] needs 8 bytes, data_offsets span 4"),
    (raw({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}, b"xx"), "out of the data block"),
    (raw({"a": {"dtype": "U8", "shape": [0], "data_offsets": [3, 1]}}, b"xxx"), "out of the data block"),
    (raw({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0]}}, b"x"), "two non-negative integers"),
    (raw({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
          "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}}, b"xxxx"), "'a' and 'b' overlap"),
    (raw({"a": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}}, b"xxxx"), r"bytes \[0, 2\)"),
    (raw({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}, b"xxxx"),
     "data block has 4 bytes but tensors cover 2"),
    (raw(b'{"a":' + json.dumps(U8_1).encode() + b',"a":' + json.dumps(U8_1).encode() + b"}", b"xx"),
     "duplicate key 'a'"),
    (raw({"__metadata__": {"epoch": 3}}), "metadata value for 'epoch' is not a string"),
    (raw({"__metadata__": [1]}), "__metadata__ is not a JSON object"),
]


@pytest.mark.parametrize("data,phrase", BAD)
def test_corrupt_input_raises_value_error(data, phrase):
    with pytest.raises(ValueError, match=phrase) as e:
        st.loads(data, "m.st")
    msg = str(e.value)
    assert msg.startswith("m.st: ") and "\n" not in msg


def test_truncated_file_names_path(tmp_path):
    path = tmp_path / "cut.safetensors"
    path.write_bytes(st.dumps(sample())[:-3])
    with pytest.raises(ValueError, match=str(path) + ": .*"):
        st.load(path)


def test_failed_save_leaves_no_temp_and_keeps_old(tmp_path, monkeypatch):
    path = tmp_path / "m.safetensors"
    st.save(path, {"a": torch.ones(2)})
    with pytest.raises(ValueError):
        st.save(path, {"a": torch.ones(2, dtype=torch.complex64)})

    def broken_replace(src, dst):
        raise OSError("disk on fire")

    # A failure after the temp file was written must remove it.
    monkeypatch.setattr(st.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk on fire"):
        st.save(path, {"a": torch.zeros(2)})
    monkeypatch.undo()
    got, _ = st.load(path)
    assert torch.equal(got["a"], torch.ones(2))
    assert os.listdir(tmp_path) == ["m.safetensors"]
