"""Integrity of what trainstep reads: a flipped bit in an artifact's or a
checkpoint's data or header is caught before any value is used, by the C++
reader and the Python one, and named (file, tensor, expected and found
checksum); files from before checksums load with a one-line notice;
`trainstep check` verifies a file without running it."""
import json
import re
import struct

import pytest

from conftest import run

pytestmark = [pytest.mark.runtime, pytest.mark.asan]

CHECKSUM_KEYS = ("checksum_algorithm", "tensor_checksums", "header_checksum")


def _layout(path):
    """(bytes, start of the data block, header JSON) of a safetensors file."""
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data)
    return data, 8 + n, json.loads(data[8:8 + n])


def _flip_in_tensor(src, dst, name, bit=3):
    """Copies src to dst with one bit flipped in the middle of tensor `name`."""
    data, start, header = _layout(src)
    begin, end = header[name]["data_offsets"]
    pos = start + (begin + end) // 2
    d = bytearray(data)
    d[pos] ^= 1 << bit
    open(dst, "wb").write(bytes(d))
    return dst


def _strip_checksums(src, dst):
    """src as a writer from before checksums wrote it (same tensors, no keys)."""
    data, start, header = _layout(src)
    for k in CHECKSUM_KEYS:
        header["__metadata__"].pop(k)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    open(dst, "wb").write(struct.pack("<Q", len(text)) + text + data[start:])
    return dst


def _first_param(art):
    _, _, header = _layout(art)
    prog = json.loads(header["__metadata__"]["program"])
    return next(s["name"] for s in prog["state"] if s["kind"] == "param")


def _error_line(p):
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainstep: "), p.stderr
    return lines[0]


def _assert_names_corrupt_tensor(line, path, tensor):
    m = re.search(rf"{re.escape(str(path))}: tensor '{re.escape(tensor)}' is corrupt: "
                  r"checksum ([0-9a-f]{16}), expected ([0-9a-f]{16})", line)
    assert m, line
    assert m.group(1) != m.group(2)


@pytest.fixture(scope="module")
def checkpoint(mnist_adadelta, small_data, tmp_path_factory):
    save = tmp_path_factory.mktemp("ckpt") / "m.ckpt"
    run("train", mnist_adadelta, "--data", f"idx:{small_data}", "--epochs", 1, "--max-batches", 2,
        "--threads", 1, "--save", save)
    return save


def test_check_accepts_good_files(mnist_adadelta, checkpoint):
    p = run("check", mnist_adadelta)
    assert "checksums OK (xxh3_64), program verified" in p.stdout and not p.stderr
    p = run("check", checkpoint, "--artifact", mnist_adadelta)
    assert "checksums OK (xxh3_64)" in p.stdout and f"fits {mnist_adadelta}" in p.stdout


def test_flipped_bit_in_artifact_data(mnist_adadelta, small_data, tmp_path):
    tensor = "state/" + _first_param(mnist_adadelta)
    bad = _flip_in_tensor(mnist_adadelta, tmp_path / "bad.tstep", tensor)
    for args in (["check", bad], ["verify", bad], ["inspect", bad],
                 ["train", bad, "--data", f"idx:{small_data}", "--max-batches", 1]):
        _assert_names_corrupt_tensor(_error_line(run(*args, check=False)), bad, tensor)


def test_flipped_bit_in_checkpoint_data(mnist_adadelta, checkpoint, small_data, tmp_path):
    tensor = _first_param(mnist_adadelta)
    bad = _flip_in_tensor(checkpoint, tmp_path / "bad.ckpt", tensor)
    for args in (["check", bad],
                 ["eval", mnist_adadelta, "--data", f"idx:{small_data}", "--checkpoint", bad],
                 ["train", mnist_adadelta, "--data", f"idx:{small_data}", "--max-batches", 1,
                  "--resume", bad]):
        _assert_names_corrupt_tensor(_error_line(run(*args, check=False)), bad, tensor)


def test_changed_header_value_is_caught(mnist_adadelta, tmp_path):
    # Same length, so only the header checksum can tell: a digit of the
    # program JSON's batch size changes.
    data, _, header = _layout(mnist_adadelta)
    old = b'\\"batch_size\\":64'  # escaped: the program is a JSON string in the header
    assert data.count(old) == 1
    bad = tmp_path / "bad.tstep"
    bad.write_bytes(data.replace(old, old[:-1] + b"5"))
    line = _error_line(run("check", bad, check=False))
    assert f"{bad}: the header is corrupt: header checksum " in line, line


def test_python_reader_checks_too(mnist_adadelta, checkpoint, tmp_path):
    from trainstep import safetensors_io
    # A checkpoint the C++ writer made passes the Python reader's checks.
    _, meta = safetensors_io.load(checkpoint)
    assert safetensors_io.has_checksums(meta)
    tensor = "state/" + _first_param(mnist_adadelta)
    bad = _flip_in_tensor(mnist_adadelta, tmp_path / "bad.tstep", tensor)
    with pytest.raises(ValueError, match=rf"bad.tstep: tensor '{re.escape(tensor)}' is corrupt: "
                                         r"checksum [0-9a-f]{16}, expected [0-9a-f]{16}"):
        safetensors_io.load(bad)


def test_old_files_without_checksums_load_with_a_notice(mnist_adadelta, checkpoint, small_data,
                                                        tmp_path):
    from trainstep import safetensors_io
    old_art = _strip_checksums(mnist_adadelta, tmp_path / "old.tstep")
    old_ck = _strip_checksums(checkpoint, tmp_path / "old.ckpt")
    notice = "has no checksums (written before trainstep checked file integrity)"
    for path, args in ((old_art, ["check", old_art]), (old_art, ["inspect", old_art]),
                       (old_ck, ["check", old_ck])):
        p = run(*args)
        lines = p.stderr.strip().splitlines()
        assert lines == [f"notice: {path} {notice}, so damage to its data cannot be detected; "
                         "re-export or re-save it to add them"], p.stderr
    p = run("train", old_art, "--data", f"idx:{small_data}", "--max-batches", 1, "--threads", 1,
            "--resume", old_ck)
    assert p.stderr.count(notice) == 2, p.stderr
    assert f"notice: {old_art} " in p.stderr and f"notice: {old_ck} " in p.stderr
    # The Python reader loads them too, with the same values.
    old, meta = safetensors_io.load(old_ck)
    new, _ = safetensors_io.load(checkpoint)
    assert not safetensors_io.has_checksums(meta)
    assert all(old[k].equal(new[k]) for k in new)


def test_interop_commands_give_the_notice_too(mnist_adadelta, checkpoint, tmp_path):
    old_art = _strip_checksums(mnist_adadelta, tmp_path / "old.tstep")
    old_ck = _strip_checksums(checkpoint, tmp_path / "old.ckpt")
    p = run("export-checkpoint", old_art, old_ck, "--out", tmp_path / "t.pt")
    lines = p.stderr.strip().splitlines()
    assert [ln.split(" has no checksums")[0] for ln in lines] == \
        [f"notice: {old_art}", f"notice: {old_ck}"], p.stderr
    p = run("import-checkpoint", mnist_adadelta, tmp_path / "t.pt", "--out", tmp_path / "n.ckpt")
    assert not p.stderr  # a current artifact: nothing to say
    p = run("check", tmp_path / "n.ckpt", "--artifact", mnist_adadelta)
    assert "checksums OK" in p.stdout


def test_a_corrupt_checkpoint_is_refused_by_export_checkpoint(mnist_adadelta, checkpoint, tmp_path):
    tensor = _first_param(mnist_adadelta)
    bad = _flip_in_tensor(checkpoint, tmp_path / "bad.ckpt", tensor)
    p = run("export-checkpoint", mnist_adadelta, bad, "--out", tmp_path / "t.pt", check=False)
    _assert_names_corrupt_tensor(_error_line(p), bad, tensor)
    assert not (tmp_path / "t.pt").exists()


def test_resaving_an_old_checkpoint_adds_checksums(mnist_adadelta, checkpoint, small_data,
                                                  tmp_path):
    old_ck = _strip_checksums(checkpoint, tmp_path / "old.ckpt")
    save = tmp_path / "new.ckpt"
    run("train", mnist_adadelta, "--data", f"idx:{small_data}", "--max-batches", 1, "--threads", 1,
        "--resume", old_ck, "--save", save)
    p = run("check", save)
    assert "checksums OK" in p.stdout and not p.stderr
