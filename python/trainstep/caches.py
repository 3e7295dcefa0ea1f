"""Tensors a model caches in plain attributes during forward.

pytorch/examples' TransformerModel does
    if self.src_mask is None or self.src_mask.size(0) != len(src):
        self.src_mask = self._generate_square_subsequent_mask(len(src))
The first forward computes the mask and keeps it; every later forward,
traced or eager, would find a tensor that is neither an input, a parameter
nor a buffer, which the capture refuses (capture._constants).

Such a tensor is a cache: what forward computes from shapes alone when the
attribute is unset. So every forward of the model starts and ends with the
attributes as the spec built them: one that was None is None again, one
that did not exist is gone. Each traced step then computes the cache inside
the graph (the compiler folds it: it is constant), and an eager run
computes the same values, so verify compares like with like.

Not a cache: a tensor the user set before export (a constant of theirs,
still refused with its line), and a tensor forward carries from one batch
to the next (a hidden state kept across batches). The golden run, eager,
tells the second kind apart: its value differs between steps, and the
export fails naming the attribute (check_eager).
"""
import linecache
import re
import weakref

import torch

from .errors import CaptureError


class CacheWatch:
    def __init__(self, model):
        mods = dict(model.named_modules())
        self.was_none = {p: {k for k, v in vars(m).items() if v is None} for p, m in mods.items()}
        self.known = {p: set(vars(m)) for p, m in mods.items()}
        self.left = weakref.WeakKeyDictionary()  # root -> {(path, name): [values left]}
        # By module path, through the root the hook is called on, so deep
        # copies of the model (the golden run's) reset their own attributes.
        model.register_forward_pre_hook(lambda root, args: self._wipe(root, None))
        model.register_forward_hook(lambda root, args, out: self._wipe(root, self.left))

    def _wipe(self, root, record):
        for path, m in root.named_modules():
            if path not in self.known:
                continue
            for k, v in list(vars(m).items()):
                if not isinstance(v, torch.Tensor):
                    continue
                if k not in self.was_none[path] and k in self.known[path]:
                    continue  # the user's own tensor: not ours to touch
                if record is not None:
                    record.setdefault(root, {}).setdefault((path, k), []).append(v)
                if k in self.was_none[path]:
                    setattr(m, k, None)
                else:
                    delattr(m, k)

    @staticmethod
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

    def check_eager(self, root):
        """Fails if an eager run's forwards left different values in one
        attribute: state carried between batches, which a compiled step,
        starting each batch from the spec's attributes, would lose."""
        for (path, k), values in self.left.pop(root, {}).items():
            first = values[0]
            for v in values[1:]:
                if v.shape != first.shape or v.dtype != first.dtype or not torch.equal(v, first):
                    name = f"{path}.{k}" if path else k
                    where = self._assigned_in_forward(root.get_submodule(path), k)
                    raise CaptureError(
                        f"forward keeps a tensor in the plain attribute '{name}' and it changes "
                        f"from one batch to the next (state carried across batches); the "
                        f"compiled step starts every batch from the attributes the spec built. "
                        f"Make it a buffer (self.register_buffer('{k}', ...)) if it is state, "
                        f"or pass it in and out of forward", where)
