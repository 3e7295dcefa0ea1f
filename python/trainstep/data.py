"""Training data from Python for `trainstep train --data npz:FILE` or
`--data shards:DIR` (docs/data.md#from-python).

write(source, path) turns what a training script already has into one
.npz file (path ends in .npz) or a folder of shards (any other path), one
array per field, the first dim the sample:

- a dict of arrays or tensors (a column each);
- a Hugging Face `datasets.Dataset`, read a block of rows at a time in
  its numpy format (columnar, no per-row Python objects); pad token lists
  to one length (e.g. padding="max_length");
- a torch `Dataset`, or anything with len() and [i], read sample by sample;
- a torch `DataLoader`, read batch by batch (its transforms and sampler
  apply; its batches are concatenated);
- any iterable of samples.

A sample is a dict (nested dicts give "a/b" names), a namedtuple or
dataclass (their field names), a tuple or list (`names`, else "x", "y"
for a pair, as torchvision's (image, label)) or one tensor ("x"). Field
names are what the C++ loop matches against the step's ports.

Leaves: tensors and numpy arrays keep their dtype (bfloat16 is refused:
numpy has none); Python ints become int64, floats float32 (what a model's
parameters are; torch's default_collate would give float64), bools bool.
Every sample must give each field the same shape and dtype; the first
that does not is one DataError naming the field and the sample.

The .npz is written whole to a temporary name and renamed into place, so
a crash leaves the old file or none. Each member carries zip's CRC-32,
which the C++ reader checks.

A shard folder streams: samples are read, `shard_size` at a time (default:
as many as make 256 MiB), into shard-NNNNNN.safetensors files, so data
larger than memory converts. Each shard is a checksummed safetensors file
(XXH3-64 of every field's bytes and of its header, as checkpoints are),
written under a temporary name and renamed. index.json lists the fields
and the finished shards; it is rewritten, atomically, after each shard,
with "complete" false until the last, so a reader (`--data shards:DIR`)
can start on the shards written so far. Dtypes the safetensors reader
does not take widen as the npz reader widens them: float16 to float32,
int8/int16/uint16 to int32, uint32 to int64.
"""
import dataclasses
import json
import os
from collections.abc import Iterable, Mapping

import numpy as np
import torch


class DataError(ValueError):
    """A source write() cannot turn into fields; the message names the
    field and the sample."""


def write(source, path, *, names=None, compressed=False, limit=None, shard_size=None):
    """Writes `source` (see the module doc) into the .npz at `path`, or,
    for a path not ending in .npz, into a folder of shards there.
    `names`: field names for tuple samples; `compressed`: deflate the
    arrays (np.savez_compressed; .npz only); `limit`: at most this many
    samples; `shard_size`: samples per shard (shards only).
    Returns {field: (dtype, shape)} of what was written."""
    if not os.fspath(path).endswith(".npz"):
        if compressed:
            raise DataError("compressed= is for a .npz; shards are stored plain, to be memory-mapped")
        return _write_shards(source, os.fspath(path), names, limit, shard_size)
    if shard_size is not None:
        raise DataError(f"shard_size= is for a folder of shards, and {os.fspath(path)} names a .npz")
    columns = _columns(source, names, limit)
    if not columns:
        raise DataError(f"{_what(source)} gave no samples")
    counts = {k: len(v) for k, v in columns.items()}
    if len(set(counts.values())) != 1:
        raise DataError("the fields disagree on the number of samples: " +
                        ", ".join(f"{k} {n}" for k, n in counts.items()))
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    save = np.savez_compressed if compressed else np.savez
    try:
        with open(tmp, "wb") as f:
            save(f, **columns)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return {k: (str(v.dtype), list(v.shape)) for k, v in columns.items()}


def _what(source):
    return f"the source ({type(source).__qualname__})"


def _columns(source, names, limit):
    if isinstance(source, Mapping):
        cols = {str(k): _array(v, str(k), "the column") for k, v in source.items()}
        for k, v in cols.items():
            if v.ndim == 0:
                raise DataError(f"field {k}: a 0-d value, not a column (its first dim is the sample)")
        return {k: v[:limit] for k, v in cols.items()}
    if isinstance(source, torch.utils.data.DataLoader):
        return _batches(source, names, limit)
    if _is_hf_dataset(source):
        return _batches(_hf_blocks(source, limit), names, limit, "rows from")
    if hasattr(source, "__len__") and hasattr(source, "__getitem__"):
        n = len(source) if limit is None else min(len(source), limit)
        return _stack((source[i] for i in range(n)), names)
    if isinstance(source, Iterable):
        return _stack(_first(source, limit), names)
    raise DataError(f"{_what(source)} is none of: a dict of arrays, a torch Dataset or "
                    "DataLoader (or anything with len() and [i]), an iterable of samples")


def _first(it, limit):
    for i, x in enumerate(it):
        if limit is not None and i >= limit:
            return
        yield x


def _fields(sample, names, where):
    """{name: leaf} of one sample (or one batch)."""
    out = {}

    def walk(x, path):
        if isinstance(x, Mapping):
            for k, v in x.items():
                walk(v, f"{path}/{k}" if path else str(k))
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name), f"{path}/{f.name}" if path else f.name)
        elif isinstance(x, tuple) and hasattr(x, "_fields"):  # namedtuple
            for k, v in zip(x._fields, x):
                walk(v, f"{path}/{k}" if path else k)
        elif isinstance(x, (tuple, list)) and not path:
            keys = list(names) if names else (["x", "y"] if len(x) == 2 else
                                              [str(i) for i in range(len(x))])
            if len(keys) != len(x):
                raise DataError(f"{where} has {len(x)} parts, and names= gives {len(keys)}: {keys}")
            for k, v in zip(keys, x):
                walk(v, k)
        else:
            out[path or "x"] = x
    walk(sample, "")
    return out


def _array(x, name, where):
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bfloat16:
            raise DataError(f"field {name} of {where} is bfloat16, which numpy cannot hold; "
                            "convert it (.float())")
        return x.detach().cpu().numpy()
    if isinstance(x, bool):
        return np.asarray(x, np.bool_)
    if isinstance(x, int):
        return np.asarray(x, np.int64)
    if isinstance(x, float):
        return np.asarray(x, np.float32)
    if isinstance(x, (np.ndarray, np.generic)):
        if x.dtype.kind in "biuf":
            return np.asarray(x)
    elif isinstance(x, list) and x:
        a = np.asarray(x)  # Python numbers: as the scalars above
        if a.dtype.kind in "biuf":
            return a.astype(np.float32) if a.dtype.kind == "f" else a
    raise DataError(f"field {name} of {where} is of type {type(x).__qualname__}, not numbers: give "
                    "tensors, arrays or numbers (e.g. apply ToTensor to an image)")


def _stack(samples, names):
    rows, first = {}, None
    for i, s in enumerate(samples):
        where = f"sample {i}"
        leaves = {k: _array(v, k, where) for k, v in _fields(s, names, where).items()}
        if first is None:
            first = {k: (a.dtype, a.shape) for k, a in leaves.items()}
            rows = {k: [] for k in leaves}
        if leaves.keys() != first.keys():
            raise DataError(f"{where} has fields {sorted(leaves)}, sample 0 had {sorted(first)}")
        for k, a in leaves.items():
            if (a.dtype, a.shape) != first[k]:
                raise DataError(f"field {k}: {where} is {a.dtype}{list(a.shape)}, sample 0 was "
                                f"{first[k][0]}{list(first[k][1])}")
            rows[k].append(a)
    return {k: np.stack(v) for k, v in rows.items()}


def _is_hf_dataset(x):
    """A Hugging Face datasets.Dataset, by its API (datasets need not be installed)."""
    return all(hasattr(x, a) for a in ("with_format", "features", "column_names", "__len__"))


HF_BLOCK = 1024


def _hf_blocks(ds, limit):
    """(label, {column: array of rows}) blocks of an HF dataset, in its numpy format."""
    n = len(ds) if limit is None else min(len(ds), limit)
    rows = ds.with_format("numpy")
    for start in range(0, n, HF_BLOCK):
        block = rows[start:min(n, start + HF_BLOCK)]
        for k, v in block.items():
            if isinstance(v, np.ndarray) and v.dtype == object:
                raise DataError(f"column {k} of rows {start}..{min(n, start + HF_BLOCK) - 1} holds rows of "
                                "different lengths or non-numbers: pad them to one length (e.g. "
                                "padding=\"max_length\") or drop the column (remove_columns)")
        yield start, block


def _batches(loader, names, limit, what="batch"):
    parts, first = {}, None
    taken = 0
    for b, batch in enumerate(loader):
        if what != "batch":  # pre-labelled blocks: (first row, block)
            b, batch = batch
        where = f"{what} {b}"
        leaves = {k: _array(v, k, where) for k, v in _fields(batch, names, where).items()}
        if first is None:
            first = {k: (a.dtype, a.shape[1:]) for k, a in leaves.items()}
            parts = {k: [] for k in leaves}
        n = None
        for k, a in leaves.items():
            if a.ndim == 0 or (a.dtype, a.shape[1:]) != first[k]:
                raise DataError(f"field {k}: {where} is {a.dtype}{list(a.shape)}, {what} 0 was "
                                f"{first[k][0]}[B, {', '.join(map(str, first[k][1]))}]")
            if n is not None and len(a) != n:
                raise DataError(f"{where}: field {k} has {len(a)} samples, others {n}")
            n = len(a)
            parts[k].append(a)
        taken += n or 0
        if limit is not None and taken >= limit:
            break
    return {k: np.concatenate(v)[:limit] for k, v in parts.items()}


# What the shard reader takes: dtype -> the dtype it is stored as.
_WIDEN = {np.dtype(np.float16): np.dtype(np.float32), np.dtype(np.int8): np.dtype(np.int32),
          np.dtype(np.int16): np.dtype(np.int32), np.dtype(np.uint16): np.dtype(np.int32),
          np.dtype(np.uint32): np.dtype(np.int64)}
_STORED = {np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_)}
SHARD_BYTES = 256 << 20


def _stored(a, name, where):
    a = np.ascontiguousarray(a)
    if a.dtype in _WIDEN:
        return a.astype(_WIDEN[a.dtype])
    if a.dtype == np.uint64:
        if a.size and a.max() > np.iinfo(np.int64).max:
            raise DataError(f"field {name} of {where}: uint64 values past int64's range")
        return a.astype(np.int64)
    if a.dtype.byteorder == ">":
        return a.astype(a.dtype.newbyteorder("<"))
    if a.dtype not in _STORED:
        raise DataError(f"field {name} of {where} is {a.dtype}, which a shard cannot hold")
    return a


def _chunks(source, names, limit):
    """(kind, index, {field: array with a leading sample dim}) pieces of
    the source, in order, at most `limit` samples in all."""
    if isinstance(source, Mapping):
        cols = _columns(source, names, limit)
        yield "column", 0, cols
        return
    if isinstance(source, torch.utils.data.DataLoader) or _is_hf_dataset(source):
        taken = 0
        blocks = _hf_blocks(source, limit) if _is_hf_dataset(source) else enumerate(source)
        kind = "rows from" if _is_hf_dataset(source) else "batch"
        for b, batch in blocks:
            where = f"{kind} {b}"
            leaves = {k: _array(v, k, where) for k, v in _fields(batch, names, where).items()}
            for k, a in leaves.items():
                if a.ndim == 0:
                    raise DataError(f"field {k}: {where} is {a.dtype}[], not a batch")
            if limit is not None:
                leaves = {k: a[:limit - taken] for k, a in leaves.items()}
            yield kind, b, leaves
            taken += len(next(iter(leaves.values()))) if leaves else 0
            if limit is not None and taken >= limit:
                return
        return
    if hasattr(source, "__len__") and hasattr(source, "__getitem__"):
        n = len(source) if limit is None else min(len(source), limit)
        samples = (source[i] for i in range(n))
    elif isinstance(source, Iterable):
        samples = _first(source, limit)
    else:
        raise DataError(f"{_what(source)} is none of: a dict of arrays, a torch Dataset or "
                        "DataLoader (or anything with len() and [i]), an iterable of samples")
    for i, s in enumerate(samples):
        where = f"sample {i}"
        yield "sample", i, {k: _array(v, k, where)[None] for k, v in _fields(s, names, where).items()}


class _ShardWriter:
    def __init__(self, folder, shard_size):
        self.folder, self.shard_size = folder, shard_size
        self.fields, self.shards, self.pending, self.count = None, [], {}, 0

    def add(self, kind, index, leaves):
        where = f"{kind} {index}"
        leaves = {k: _stored(a, k, where) for k, a in leaves.items()}
        if self.fields is None:
            self.fields = {k: (a.dtype, a.shape[1:]) for k, a in leaves.items()}
            self.pending = {k: [] for k in leaves}
            if self.shard_size is None:
                row = sum(max(1, a.dtype.itemsize * int(np.prod(a.shape[1:]))) for a in leaves.values())
                self.shard_size = max(1, SHARD_BYTES // row)
            os.makedirs(self.folder, exist_ok=True)
            self._index(complete=False)  # from here a reader sees this write's shards only
        if leaves.keys() != self.fields.keys():
            raise DataError(f"{where} has fields {sorted(leaves)}, the first had {sorted(self.fields)}")
        n = None
        for k, a in leaves.items():
            dtype, shape = self.fields[k]
            if (a.dtype, a.shape[1:]) != (dtype, shape):
                raise DataError(f"field {k}: {where} is {a.dtype}{list(a.shape[1:])} a sample, the first "
                                f"was {dtype}{list(shape)}")
            if n is not None and len(a) != n:
                raise DataError(f"{where}: field {k} has {len(a)} samples, others {n}")
            n = len(a)
        start = 0
        while start < n:
            room = self.shard_size - self.count
            for k, a in leaves.items():
                self.pending[k].append(a[start:start + room])
            took = min(room, n - start)
            self.count += took
            start += took
            if self.count == self.shard_size:
                self.flush()

    def flush(self):
        if not self.count:
            return
        from . import safetensors_io
        first = sum(s["samples"] for s in self.shards)
        name = f"shard-{len(self.shards):06d}.safetensors"
        tensors = {k: torch.from_numpy(np.concatenate(v)) for k, v in self.pending.items()}
        meta = {"format": "trainstep-shard", "first_sample": str(first), "samples": str(self.count)}
        written = safetensors_io.save(os.path.join(self.folder, name), tensors, meta)
        self.shards.append({"file": name, "samples": self.count,
                            "header_checksum": written[safetensors_io.HEADER_KEY]})
        self.pending = {k: [] for k in self.pending}
        self.count = 0
        self._index(complete=False)

    def _index(self, complete):
        fields = [{"name": k, "dtype": str(d), "shape": [int(x) for x in s]}
                  for k, (d, s) in (self.fields or {}).items()]
        doc = {"format": "trainstep-shards", "version": 1, "complete": complete, "fields": fields,
               "shards": self.shards}
        path = os.path.join(self.folder, "index.json")
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def _write_shards(source, folder, names, limit, shard_size):
    if shard_size is not None and (not isinstance(shard_size, int) or shard_size < 1):
        raise DataError(f"shard_size={shard_size!r}: a positive number of samples")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise DataError(f"{folder} is a file; shards go into a folder (or name a .npz)")
    w = _ShardWriter(folder, shard_size)
    for kind, index, leaves in _chunks(source, names, limit):
        w.add(kind, index, leaves)
    w.flush()
    if w.fields is None:
        raise DataError(f"{_what(source)} gave no samples")
    w._index(complete=True)
    keep = {s["file"] for s in w.shards}
    for f in os.listdir(folder):  # shards of an earlier, longer write
        if f.startswith("shard-") and f.endswith(".safetensors") and f not in keep:
            os.remove(os.path.join(folder, f))
    total = sum(s["samples"] for s in w.shards)
    return {k: (str(d), [total, *map(int, s)]) for k, (d, s) in w.fields.items()}
