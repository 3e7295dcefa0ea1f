"""Read and write safetensors files with torch + numpy only.

Mirrors the C++ reader/writer in src/io/safetensors.cpp: the same dtypes, the
same header layout (sorted keys, compact JSON, space padding to 8 bytes) and
the same validation. Every problem with a file raises ValueError with one
line that names the source.

Integrity, as src/io/checksum.h: a written file carries an XXH3-64 of every
tensor's bytes and of the rest of its header; a read checks them before it
returns anything. Files without checksums (written before they existed)
still load; `has_checksums(metadata)` tells them apart.
"""

import json
import os
import struct
import warnings

import numpy as np
import torch
import xxhash

# safetensors name -> (torch dtype, little-endian numpy dtype)
_DTYPES = {
    "F32": (torch.float32, np.dtype("<f4")),
    "F64": (torch.float64, np.dtype("<f8")),
    "I64": (torch.int64, np.dtype("<i8")),
    "I32": (torch.int32, np.dtype("<i4")),
    "U8": (torch.uint8, np.dtype("u1")),
    "BOOL": (torch.bool, np.dtype("?")),
    # numpy has no bfloat16: its bytes travel as int16 and are viewed back.
    "BF16": (torch.bfloat16, np.dtype("<i2")),
}
_NAME_OF = {t: name for name, (t, _) in _DTYPES.items()}

_MAX_HEADER = 100 << 20
_MAX_RANK = 16
_INT64_MAX = (1 << 63) - 1

ALGORITHM_KEY, TENSORS_KEY, HEADER_KEY = "checksum_algorithm", "tensor_checksums", "header_checksum"
ALGORITHM = "xxh3_64"
_CHECKSUM_KEYS = (ALGORITHM_KEY, TENSORS_KEY, HEADER_KEY)


def has_checksums(metadata):
    """True if the file's metadata has checksums (the reader checked them)."""
    return any(k in metadata for k in _CHECKSUM_KEYS)


class UncheckedFileWarning(UserWarning):
    """A file from before checksums was read: damage to it cannot be seen."""


def warn_if_unchecked(path, metadata):
    """Warns (UncheckedFileWarning) when the file `path` had no checksums;
    the CLIs print it as one notice line, as the C++ side does."""
    if not has_checksums(metadata):
        warnings.warn(UncheckedFileWarning(
            f"{path} has no checksums (written before trainstep checked file integrity), so "
            "damage to its data cannot be detected; re-export or re-save it to add them"),
            stacklevel=2)


def without_checksums(metadata):
    """The metadata less the checksum keys (what the file's writer was given)."""
    return {k: v for k, v in metadata.items() if k not in _CHECKSUM_KEYS}


def _u64(v):
    return struct.pack("<Q", v)


def _str(s):
    b = s.encode()
    return _u64(len(b)) + b


def header_checksum(metadata, entries):
    """XXH3-64 hex of the header as src/io/checksum.cpp encodes it: metadata
    (less the header checksum) in key order, then (name, dtype, shape, begin,
    end) of every tensor in name order, each field length-prefixed."""
    buf = [b"trainstep-header-checksum-v1"]
    for k in sorted(metadata, key=lambda k: k.encode()):
        if k != HEADER_KEY:
            buf += [b"M", _str(k), _str(metadata[k])]
    for name, st_name, shape, begin, end in sorted(entries, key=lambda e: e[0].encode()):
        buf += [b"T", _str(name), _str(st_name), _u64(len(shape))]
        buf += [_u64(d) for d in shape] + [_u64(begin), _u64(end)]
    return xxhash.xxh3_64_hexdigest(b"".join(buf))


def dumps(tensors, metadata=None):
    """Serialize {name: tensor} (+ optional {str: str} metadata) to bytes."""
    return _dumps(tensors, metadata)[0]


def _dumps(tensors, metadata):
    """(bytes, the metadata written: checksum keys included)."""
    header = {}
    metadata = {k: v for k, v in (metadata or {}).items() if k not in _CHECKSUM_KEYS}
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(f"safetensors: metadata {k!r}: keys and values must be str")
    chunks, sums, entries = [], {}, []
    offset = 0
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise ValueError(f"safetensors: tensor name {name!r} is not a str")
        if name == "__metadata__":
            raise ValueError("safetensors: '__metadata__' cannot be a tensor name")
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"safetensors: tensor '{name}' is a {type(t).__name__}, not a torch.Tensor")
        if t.dtype not in _NAME_OF:
            raise ValueError(f"safetensors: tensor '{name}' has unsupported dtype {t.dtype}")
        st_name = _NAME_OF[t.dtype]
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        arr = t.numpy().astype(_DTYPES[st_name][1], copy=False)
        raw = arr.tobytes()
        header[name] = {"dtype": st_name, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        sums[name] = xxhash.xxh3_64_hexdigest(raw)
        entries.append((name, st_name, tuple(t.shape), offset, offset + len(raw)))
        chunks.append(raw)
        offset += len(raw)
    metadata[ALGORITHM_KEY] = ALGORITHM
    metadata[TENSORS_KEY] = json.dumps(sums, sort_keys=True, separators=(",", ":"),
                                       ensure_ascii=False)
    metadata[HEADER_KEY] = header_checksum(metadata, entries)
    header["__metadata__"] = metadata
    # Same spelling as the C++ writer (nlohmann: sorted keys, compact, UTF-8).
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks), metadata


def save(path, tensors, metadata=None):
    """Write a safetensors file atomically (temp file, fsync, rename).
    Returns the metadata written, checksum keys included."""
    data, written = _dumps(tensors, metadata)
    path = os.fspath(path)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    # Make the rename durable; some filesystems cannot fsync a directory.
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return written


def load(path):
    """Read a safetensors file -> ({name: tensor} in file order, metadata)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    return loads(data, path)


def _no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise _Duplicate(k)
        seen[k] = v
    return seen


class _Duplicate(Exception):
    pass


def _count(x):
    # bool is an int subclass in Python; JSON true is not a count.
    return type(x) is int and 0 <= x <= _INT64_MAX


def loads(data, what="<bytes>"):
    """Parse safetensors bytes; `what` names the source in error messages."""
    data = bytes(data)
    if len(data) < 8:
        raise ValueError(f"{what}: too short for safetensors ({len(data)} bytes, need at least 8)")
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > _MAX_HEADER:
        raise ValueError(f"{what}: header length {n} exceeds the 100 MiB limit")
    if n > len(data) - 8:
        raise ValueError(f"{what}: truncated: header says {n} bytes, file has {len(data) - 8} "
                         "after the length prefix")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"), object_pairs_hook=_no_duplicates)
    except _Duplicate as e:
        raise ValueError(f"{what}: duplicate key '{e.args[0]}' in header") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{what}: header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{what}: header is not a JSON object")

    block = memoryview(data)[8 + n:]
    metadata = {}
    entries = []
    for name, e in header.items():
        if name == "__metadata__":
            if not isinstance(e, dict):
                raise ValueError(f"{what}: __metadata__ is not a JSON object")
            for k, v in e.items():
                if not isinstance(v, str):
                    raise ValueError(f"{what}: metadata value for '{k}' is not a string")
                metadata[k] = v
            continue
        entries.append(_parse_entry(what, name, e, len(block)))

    # Tensors must tile the data block exactly: no overlaps, gaps or slack.
    entries.sort(key=lambda e: (e[3], e[4]))
    pos, prev = 0, None
    for name, _, _, begin, end in entries:
        if begin < pos:
            raise ValueError(f"{what}: tensors '{prev}' and '{name}' overlap in the data block")
        if begin > pos:
            raise ValueError(f"{what}: bytes [{pos}, {begin}) of the data block are not covered by any tensor")
        pos = end
        if end > begin:
            prev = name
    if pos != len(block):
        raise ValueError(f"{what}: data block has {len(block)} bytes but tensors cover {pos}")
    sums = _check_header(what, metadata, entries)

    tensors = {}
    for name, st_name, shape, begin, end in entries:
        if sums is not None:
            found = xxhash.xxh3_64_hexdigest(block[begin:end])
            if found != sums[name]:
                raise ValueError(f"{what}: tensor '{name}' is corrupt: checksum {found}, expected "
                                 f"{sums[name]} (restore the file from a good copy or re-create it)")
        tdtype, npdtype = _DTYPES[st_name]
        if end == begin:
            tensors[name] = torch.empty(shape, dtype=tdtype)
        else:
            arr = np.frombuffer(block[begin:end], dtype=npdtype).reshape(shape)
            # Copy into native byte order so torch owns writable memory.
            t = torch.from_numpy(arr.astype(npdtype.newbyteorder("="), copy=True))
            tensors[name] = t.view(torch.bfloat16) if tdtype == torch.bfloat16 else t
    return tensors, metadata


def _check_header(what, metadata, entries):
    """{name: expected checksum} after checking the header checksum, or None
    for a file without checksums."""
    if not has_checksums(metadata):
        return None
    for k in _CHECKSUM_KEYS:
        if k not in metadata:
            raise ValueError(f"{what}: the header is damaged: it has checksums but no '{k}' entry")
    if metadata[ALGORITHM_KEY] != ALGORITHM:
        raise ValueError(f"{what}: unknown checksum algorithm '{metadata[ALGORITHM_KEY]}' "
                         f"(this version checks {ALGORITHM})")
    found = header_checksum(metadata, entries)
    if found != metadata[HEADER_KEY]:
        raise ValueError(f"{what}: the header is corrupt: header checksum {found}, expected "
                         f"{metadata[HEADER_KEY]} (restore the file from a good copy or re-create it)")
    try:
        sums = json.loads(metadata[TENSORS_KEY])
    except json.JSONDecodeError:
        sums = None
    if not isinstance(sums, dict) or len(sums) != len(entries):
        raise ValueError(f"{what}: the tensor checksums do not list every tensor")
    for name, *_ in entries:
        if not isinstance(sums.get(name), str):
            raise ValueError(f"{what}: tensor '{name}' has no checksum")
    return sums


def _parse_entry(what, name, e, block_size):
    where = f"{what}: tensor '{name}': "
    if not isinstance(e, dict):
        raise ValueError(where + "entry is not a JSON object")
    for k in ("dtype", "shape", "data_offsets"):
        if k not in e:
            raise ValueError(where + f'missing "{k}"')
    st_name = e["dtype"]
    if not isinstance(st_name, str):
        raise ValueError(where + "dtype is not a string")
    if st_name not in _DTYPES:
        raise ValueError(where + f"unknown dtype '{st_name}'")
    shape = e["shape"]
    if not isinstance(shape, list):
        raise ValueError(where + "shape is not a list")
    if len(shape) > _MAX_RANK:
        raise ValueError(where + f"rank {len(shape)} exceeds the limit of {_MAX_RANK}")
    numel = 1
    for d in shape:
        if not _count(d):
            raise ValueError(where + "shape is not a list of non-negative integers")
        numel *= d
        # Same left-to-right bound as the C++ side.
        if numel > _INT64_MAX:
            raise ValueError(where + f"shape {shape} overflows the element count")
    nbytes = numel * _DTYPES[st_name][1].itemsize
    if nbytes > _INT64_MAX:
        raise ValueError(where + f"shape {shape} overflows the byte size")
    offs = e["data_offsets"]
    if not (isinstance(offs, list) and len(offs) == 2 and all(_count(o) for o in offs)):
        raise ValueError(where + "data_offsets is not a list of two non-negative integers")
    begin, end = offs
    if begin > end or end > block_size:
        raise ValueError(where + f"data_offsets [{begin}, {end}] out of the data block ({block_size} bytes)")
    if end - begin != nbytes:
        raise ValueError(where + f"size mismatch: {st_name}{shape} needs {nbytes} bytes, "
                         f"data_offsets span {end - begin}")
    return (name, st_name, tuple(shape), begin, end)
