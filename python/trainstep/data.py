"""Training data from Python for `trainstep train --data npz:FILE`
(docs/data.md#from-python).

write(source, path) turns what a training script already has into one
.npz file, one array per field, the first dim the sample:

- a dict of arrays or tensors (a column each);
- a torch `Dataset`, or anything with len() and [i], read sample by sample
  (a Hugging Face `datasets.Dataset` too: its rows are dicts of lists and
  numbers; pad token lists to one length, e.g. padding="max_length");
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

The file is written whole to a temporary name and renamed into place, so
a crash leaves the old file or none. Each member carries zip's CRC-32,
which the C++ reader checks.
"""
import dataclasses
import os
from collections.abc import Iterable, Mapping

import numpy as np
import torch


class DataError(ValueError):
    """A source write() cannot turn into fields; the message names the
    field and the sample."""


def write(source, path, *, names=None, compressed=False, limit=None):
    """Writes `source` (see the module doc) into the .npz at `path`.
    `names`: field names for tuple samples; `compressed`: deflate the
    arrays (np.savez_compressed); `limit`: at most this many samples.
    Returns {field: (dtype, shape)} of what was written."""
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


def _batches(loader, names, limit):
    parts, first = {}, None
    taken = 0
    for b, batch in enumerate(loader):
        where = f"batch {b}"
        leaves = {k: _array(v, k, where) for k, v in _fields(batch, names, where).items()}
        if first is None:
            first = {k: (a.dtype, a.shape[1:]) for k, a in leaves.items()}
            parts = {k: [] for k in leaves}
        n = None
        for k, a in leaves.items():
            if a.ndim == 0 or (a.dtype, a.shape[1:]) != first[k]:
                raise DataError(f"field {k}: {where} is {a.dtype}{list(a.shape)}, batch 0 was "
                                f"{first[k][0]}[B, {', '.join(map(str, first[k][1]))}]")
            if n is not None and len(a) != n:
                raise DataError(f"{where}: field {k} has {len(a)} samples, others {n}")
            n = len(a)
            parts[k].append(a)
        taken += n or 0
        if limit is not None and taken >= limit:
            break
    return {k: np.concatenate(v)[:limit] for k, v in parts.items()}
