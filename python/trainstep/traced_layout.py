"""What a traced optimizer's step() keeps, and where it starts
(traced_optim.py): found by running step() eagerly on copies of the
parameters with seeded random gradients. Each state value is a Kind: a
tensor of a dtype and shape, or a Python int or float (kept as a 0-d
float64 tensor)."""
import copy
from dataclasses import dataclass

import torch

from .errors import CaptureError
from .optim import UnsupportedOptimizer


@dataclass
class Kind:
    """What step() keeps under one state key: a tensor (dtype, shape), or a
    Python "int" / "float" (kept as a 0-d float64 tensor)."""
    kind: str
    dtype: torch.dtype = torch.float64
    shape: tuple = ()

    @classmethod
    def from_json(cls, d):
        if d["kind"] != "tensor":
            return cls(d["kind"])
        return cls("tensor", getattr(torch, d["dtype"]), tuple(d["shape"]))

    def json(self):
        d = {"kind": self.kind}
        if self.kind == "tensor":
            d.update(dtype=str(self.dtype).replace("torch.", ""), shape=list(self.shape))
        return d


def _kind_of(v, where):
    if isinstance(v, torch.Tensor):
        return Kind("tensor", v.dtype, tuple(v.shape))
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise UnsupportedOptimizer(
            f"{where} is a {type(v).__name__}; trainstep keeps tensors and Python numbers "
            "as optimizer state")
    return Kind("int" if isinstance(v, int) else "float")


@dataclass
class _Found:
    layout: dict         # name -> {key: Kind}
    start: dict          # name -> {key: value}, as torch keeps it
    group_layout: list   # per group, {key: Kind}
    group_start: list    # per group, {key: value}
    first_step: bool     # whether the first step differs from later ones


class Layout:
    """What step() keeps, and where it starts: found by running it eagerly
    on copies of the parameters with seeded random gradients."""

    def __init__(self, opt, params):
        self.o, self.params = opt, params

    def _grads(self, seed):
        g = torch.Generator().manual_seed(seed)
        return {n: torch.randn(self.params[n].shape, generator=g, dtype=self.params[n].dtype)
                for n in self.o.updated}

    def _first(self, values, state):
        """step() once from `state`, recording: (new state, group changes,
        the first value stored per key, per group the same)."""
        o, first, gfirst = self.o, {}, {}
        try:
            _, new_s, changed = o.eager_step(values, self._grads(0), copy.deepcopy(state),
                                             record=first, grecord=gfirst)
        except (CaptureError, UnsupportedOptimizer):
            raise
        except Exception as e:
            raise UnsupportedOptimizer(
                f"optimizer {o.name} ({o.source}): its step() failed on copies of the "
                f"parameters with random gradients: {type(e).__name__}: {e}") from e
        return new_s, changed, first, gfirst

    def _groups(self, changed, gfirst):
        """Per group, its state's kinds and start: the user's value where the
        group has the key, else the first value step() stores under it."""
        kinds, starts = [], []
        for i, (tg, ch) in enumerate(zip(self.o.opt.param_groups, changed)):
            where = f"optimizer {self.o.name}: param group {i}'s"
            kinds.append({k: _kind_of(v, f"{where} '{k}'") for k, v in ch.items()})
            starts.append({k: tg[k] if k in tg else gfirst.get(i, {}).get(k, v)
                           for k, v in ch.items()})
        return kinds, starts

    def find(self):
        o = self.o
        values = {n: self.params[n].detach() for n in o.updated}
        live = {n: o.opt.state.get(o._by_param[n]) for n in o.updated}
        if any(live.values()):
            # The user's optimizer has stepped already (or made its state in
            # __init__): its state is the start.
            _, changed, _, gfirst = self._first(values, {n: dict(v or {}) for n, v in live.items()})
            glayout, gstart = self._groups(changed, gfirst)
            layout = {n: self._kinds(n, live[n]) for n in o.updated}
            return _Found(layout, {n: dict(live[n]) for n in o.updated}, glayout, gstart, False)
        new_s, changed, first, gfirst = self._first(values, {})
        glayout, gstart = self._groups(changed, gfirst)
        layout = {n: self._kinds(n, new_s[n]) for n in o.updated}
        starts = [{n: {k: first[n].get(k, new_s[n][k]) for k in layout[n]} for n in o.updated}]
        if any(kd.kind == "tensor" for ks in layout.values() for kd in ks.values()):
            starts.append({n: {k: (torch.zeros_like(first[n][k]) if kd.kind == "tensor"
                                   and isinstance(first[n].get(k), torch.Tensor)
                                   else first[n].get(k, 0 if kd.kind == "int" else 0.0))
                               for k, kd in layout[n].items()} for n in o.updated})
        for start in starts:
            if self._steady_is_first(values, start, gstart):
                return _Found(layout, start, glayout, gstart, False)
        return _Found(layout, starts[0], glayout, gstart, True)

    def _kinds(self, n, st):
        kinds = {}
        for k, v in st.items():
            if v is None:
                continue
            kinds[k] = _kind_of(v, f"optimizer {self.o.name}: state '{k}' of {n}")
        return kinds

    def _steady_is_first(self, values, start, gstart):
        """Whether step() from `start` computes what its first step does,
        bit for bit, on two draws of gradients."""
        o = self.o
        for seed in (1, 2):
            grads = self._grads(seed)
            a_v, a_s, a_g = o.eager_step(values, grads, {})
            try:
                b_v, b_s, b_g = o.eager_step(values, grads, copy.deepcopy(start),
                                             gstate=copy.deepcopy(gstart))
            except Exception:
                return False
            if not all(_equal(a.get(k), b.get(k)) for a, b in zip(a_g, b_g) for k in a):
                return False
            for n in o.updated:
                if not torch.equal(a_v[n], b_v[n]):
                    return False
                if not all(_equal(x, b_s[n].get(k)) for k, x in a_s[n].items()):
                    return False
        return True


def _equal(x, y):
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return torch.equal(x, y)
    return type(x) is type(y) and x == y
