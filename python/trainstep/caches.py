"""Tensors a model caches in plain attributes during forward.

pytorch/examples' TransformerModel does
    if self.src_mask is None or self.src_mask.size(0) != len(src):
        self.src_mask = self._generate_square_subsequent_mask(len(src))
The first forward computes the mask and keeps it; every later forward would
find a tensor that is neither an input, a parameter nor a buffer, which the
capture refuses (rewrites._constants).

Such a tensor is a cache: what forward computes from shapes alone when the
attribute is unset. So every traced forward starts and ends with the
attributes as the spec built them: one that was None is None again, one
that did not exist is gone. Each compiled step then computes the cache in
its graph (the compiler folds it: it is constant).

The eager golden run keeps the model's own behaviour (`natural()`): the
cache survives from batch to batch, as in the user's training loop, so the
oracle is what PyTorch really does. Where an attribute's value changes
between batches, it may be state carried across batches (a hidden state
kept from the last batch), which the compiled step would lose, or only
written (an attention map kept for plotting). The golden run then tells
them apart by running the steps again with the attributes reset
(golden.record): a different result is carried state, and the export fails
naming the attribute. A tensor the user set before export is not touched:
it is a constant of theirs, still refused with its line.
"""
import contextlib
import linecache
import re

import torch

from .errors import CaptureError


class CacheWatch:
    def __init__(self, model):
        mods = dict(model.named_modules())
        self.was_none = {p: {k for k, v in vars(m).items() if v is None} for p, m in mods.items()}
        self.known = {p: set(vars(m)) for p, m in mods.items()}
        self.resetting = True
        self.changing = {}  # "path.name" -> 'FILE:LINE' of its assignment (or None)
        self._last = {}     # (path, name) -> the value the last forward left (one natural run)
        # By module path, through the root the hook is called on, so deep
        # copies of the model (the golden run's) reset their own attributes.
        model.register_forward_pre_hook(lambda root, args: self._forward(root, False))
        model.register_forward_hook(lambda root, args, out: self._forward(root, True))

    @contextlib.contextmanager
    def natural(self):
        """Eager runs: attributes live on as the model's code leaves them,
        and those whose value changes between forwards are noted."""
        self.resetting, self._last = False, {}
        try:
            yield
        finally:
            self.resetting, self._last = True, {}

    def _caches(self, root):
        for path, m in root.named_modules():
            if path not in self.known:
                continue
            for k, v in list(vars(m).items()):
                if isinstance(v, torch.Tensor) and (k in self.was_none[path]
                                                    or k not in self.known[path]):
                    yield path, m, k, v

    def _forward(self, root, after):
        for path, m, k, v in self._caches(root):
            if not self.resetting:
                if after:
                    self._note(path, m, k, v)
                continue
            if k in self.was_none[path]:
                setattr(m, k, None)
            else:
                delattr(m, k)

    def _note(self, path, m, k, v):
        key = (path, k)
        last = self._last.get(key)
        if last is not None and not (last.shape == v.shape and last.dtype == v.dtype
                                     and torch.equal(last, v)):
            self.changing.setdefault(f"{path}.{k}" if path else k, _assigned_in_forward(m, k))
        self._last[key] = v.detach().clone()

    def carried_state_error(self):
        """The error for attributes that changed between batches, once a
        run with them reset gave a different result."""
        name, where = sorted(self.changing.items())[0]
        k = name.rsplit(".", 1)[-1]
        return CaptureError(
            f"forward keeps a tensor in the plain attribute '{name}' and it changes from one "
            f"batch to the next, carrying state across batches (eager steps give other "
            f"results when it is reset); the compiled step starts every batch from the "
            f"attributes the spec built. Make it a buffer (self.register_buffer('{k}', ...)) "
            f"if it is state, or pass it in and out of forward", where)


def _assigned_in_forward(m, k):
    """'FILE:LINE' of `self.k = ...` in the module's forward, or None."""
    pat = re.compile(rf"self\.{re.escape(k)}\s*=[^=]")
    for cls in type(m).__mro__:
        code = getattr(cls.__dict__.get("forward"), "__code__", None)
        if code is None:
            continue
        lines = linecache.getlines(code.co_filename)
        last = max((ln for _, _, ln in code.co_lines() if ln), default=code.co_firstlineno)
        for i in range(code.co_firstlineno, min(last, len(lines)) + 1):
            if pat.search(lines[i - 1]):
                return f"{code.co_filename}:{i}"
    return None
