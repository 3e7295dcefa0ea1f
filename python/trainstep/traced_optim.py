"""The user's optimizer, traced from its own step().

Any torch.optim.Optimizer whose step() is straight-line tensor code
exports: torch's own, a third-party one, one written in the spec. While the
train step is traced, a stand-in of the optimizer (the user's object is
never touched) runs its real step() on the traced values:

- each parameter is a traced tensor with the traced gradient as `.grad`;
- `self.state` holds the traced state: tensors as they are, Python numbers
  (`state["step"] = 0`, then `+= 1`) as 0-d float64 `Scalar`s;
- each group's "lr" is a Scalar of the runtime LR input (times the group's
  ratio to group 0), so schedules need no re-export; every other
  hyper-parameter is a constant of the step;
- torch.compiler.is_compiling() is True, and torch's own optimizers take
  their capturable path (tensor step counts, no .item()), as torch.compile
  traces them;
- functionalize turns step()'s in-place updates into new values.

State is what step() keeps, found by running it once eagerly on copies
(traced_layout.py). Lazily created state (`if len(state) == 0: state["m"] = 0`)
starts from the value step() first stores. Where the first step computes
something else than the later steps do from that start (SGD with
dampening sets its buffer to the gradient), the step carries both and picks
by the step count (`first_step` in the artifact's optimizer JSON).

Python numbers step() keeps in a param group (`group["step"] += 1`, as
pytorch-optimizer's optimizers count) are state too, one per group.

State names: "optim/<param name>/<state key>", a group's
"optim/param_groups/<i>/<key>", plus the shared step count "optim/step"
(optim.STEP) that every artifact has.
"""
import collections
from dataclasses import dataclass, field

import torch

from . import scalars
from .errors import CaptureError
from .optim import STEP, UnsupportedOptimizer, check_group_options, lr_scale, state_name
from .traced_layout import Kind, Layout


def group_state_name(i, key):
    return f"optim/param_groups/{i}/{key}"


@dataclass
class Group:
    """One torch param group: its parameters (every one, in torch's order),
    the ones the step updates, its LR as a multiple of the runtime LR, its
    options (hyper-parameters), and the Python numbers step() keeps in it:
    `state` (key -> Kind), where they start, and which of them the group
    gets only on its first step (`lazy`)."""
    params: list
    updated: list
    lr_scale: float
    options: dict
    state: dict = field(default_factory=dict)
    start: dict = field(default_factory=dict)
    lazy: list = field(default_factory=list)


def _as_state(v, kind):
    """A torch state value as trainstep's state tensor."""
    if kind.kind == "tensor":
        return v.detach().clone()
    return torch.tensor(float(v), dtype=torch.float64)


def _as_torch(t, kind):
    """A state tensor as the value torch keeps."""
    if kind.kind == "tensor":
        return t.detach().clone()
    v = float(t)
    return int(v) if kind.kind == "int" else v


class _Recording(dict):
    """A parameter's state dict that keeps the first value stored under each
    key (cloned then, before step() updates it in place)."""

    def __init__(self, log, *a):
        super().__init__(*a)
        self.log = log

    def __setitem__(self, k, v):
        if k not in self.log:
            self.log[k] = v.detach().clone() if isinstance(v, torch.Tensor) else v
        super().__setitem__(k, v)


class TracedOptimizer:
    """The functional form of a torch optimizer, by tracing its step();
    the same interface as optim.Optimizer (capture, golden, checkpoints)."""
    traced = True
    # The LR input is float64: step() computes with the LR as a Python float.
    lr_dtype = torch.float64

    def __init__(self, opt, names, updated, params):
        """names: per torch param group, each parameter's state name;
        updated: the names the step updates; params: name -> tensor."""
        self.opt = opt
        self.name = type(opt).__name__
        self.source = f"{type(opt).__module__}.{type(opt).__qualname__}"
        groups = opt.param_groups
        self.base_lr = float(groups[0]["lr"])
        self.defaults = {k: v for k, v in opt.defaults.items() if k != "params"}
        self.groups = []
        for i, (g, gnames) in enumerate(zip(groups, names)):
            check_group_options(self.name, i, g)
            scale = lr_scale(self.name, i, g, self.base_lr)
            opts = {k: v for k, v in g.items() if k != "params"}
            upd = [n for n in gnames if n in updated]
            self.groups.append(Group(list(gnames), upd, scale, opts))
        self._by_param = {}  # name -> torch Parameter of the user's optimizer
        for g, gnames in zip(groups, names):
            self._by_param.update(zip(gnames, g["params"]))
        found = Layout(self, params).find()
        self.layout, self.start, self.first_step = found.layout, found.start, found.first_step
        for g, tg, gl, gs in zip(self.groups, groups, found.group_layout, found.group_start):
            g.state, g.start = gl, gs
            g.lazy = [k for k in gl if k not in tg]
            g.options = {k: v for k, v in g.options.items() if k not in gl}
        # Whether torch has state before the first step (made in __init__,
        # as Adagrad's): a checkpoint at step 0 then holds it too.
        self.state_at_start = any(opt.state.get(self._by_param[n]) for n in self.updated)

    @classmethod
    def from_json(cls, j, initial):
        """The optimizer an artifact's program JSON describes (to_json),
        without its step(): enough to convert checkpoints. initial: state
        name -> tensor, the artifact's state at export."""
        self = cls.__new__(cls)
        from .optim import _py_options
        self.opt, self.name, self.source = None, j["type"], j.get("source", "?")
        self.base_lr, self.first_step = float(j["lr"]), bool(j.get("first_step"))
        self.state_at_start = bool(j.get("state_at_start"))
        self.defaults = _py_options(j.get("defaults", {}))
        self.groups = []
        for i, g in enumerate(j["groups"]):
            kinds = {k: Kind.from_json(d) for k, d in g.get("state", {}).items()}
            self.groups.append(Group(
                list(g["params"]), list(g["updated"]), float(g["lr_scale"]),
                _py_options(g["options"]), kinds,
                {k: _as_torch(initial[group_state_name(i, k)], kd) for k, kd in kinds.items()},
                list(g.get("lazy", []))))
        self.layout = {n: {k: Kind.from_json(d) for k, d in ks.items()}
                       for n, ks in j["state"].items()}
        self.start = {n: {k: _as_torch(initial[state_name(n, k)], kd) for k, kd in ks.items()}
                      for n, ks in self.layout.items()}
        return self

    @property
    def updated(self):
        return [n for g in self.groups for n in g.updated]

    # --- the stand-in --------------------------------------------------

    def _stand_in(self, values, grads, state, lrs, record=None, gstate=None, grecord=None,
                  copy_grads=False):
        """A shallow copy of the user's optimizer over stand-in parameters:
        values[n] (cloned: step() updates it in place) with grads[n] as
        .grad, state[n] its state dict, lrs[i] group i's LR, gstate[i] (if
        given) group i's own state. record / grecord: dicts that get the
        first value step() stores under each key of a parameter's state /
        of group i. copy_grads: each .grad a copy of grads[n], for a step
        run eagerly on the caller's gradients (Muon's step() lerps its
        .grad in place, and the next probe would read that). Returns the
        copy and name -> stand-in."""
        sh = object.__new__(type(self.opt))
        sh.__dict__.update(self.opt.__dict__)
        sh.state = collections.defaultdict(dict)
        sh.param_groups = []
        stand = {}
        for gi, (g, tg) in enumerate(zip(self.groups, self.opt.param_groups)):
            ng = {k: v for k, v in tg.items() if k != "params"}
            if gstate is not None:
                ng.update(gstate[gi])
            ng["lr"] = lrs[gi]
            # One tensor at a time, on the path torch.compile traces.
            for k, v in (("foreach", False), ("fused", False), ("capturable", True)):
                if k in ng:
                    ng[k] = v
            ps = []
            for n in g.params:
                # A parameter the step does not update (grad None: step()
                # skips it) stands in as zeros of its shape, made here: the
                # user's tensor read inside the trace would be a constant.
                ref = self._by_param[n]
                q = values[n].detach().clone() if n in values else \
                    torch.zeros(ref.shape, dtype=ref.dtype)
                if n in grads and n in g.updated:
                    q.grad = grads[n].clone() if copy_grads else grads[n]
                    st = state.get(n) or {}
                    sh.state[q] = _Recording(record.setdefault(n, {}), st) \
                        if record is not None else dict(st)
                    stand[n] = q
                ps.append(q)
            ng["params"] = ps
            if grecord is not None:
                ng = _Recording(grecord.setdefault(gi, {}), ng)
            sh.param_groups.append(ng)
        return sh, stand

    def eager_step(self, values, grads, state, record=None, gstate=None, grecord=None):
        """step() once, eagerly, on copies: (new values, new torch state
        by name, each group's changed Python numbers). state: name -> {key:
        value} as torch keeps it; gstate: per group, its state's values."""
        lrs = [self.base_lr * g.lr_scale if g.lr_scale != 1.0 else self.base_lr
               for g in self.groups]
        capturable = [("capturable" in g) for g in self.opt.param_groups]
        sh, stand = self._stand_in(values, grads, state, lrs, record, gstate, grecord,
                                   copy_grads=True)
        for ng, cap in zip(sh.param_groups, capturable):
            if cap:
                ng["capturable"] = False  # eager runs torch's own CPU path
        before = [dict(g) for g in sh.param_groups]
        with torch.no_grad():
            sh.step()
        changed = self._group_changes(before, sh)
        self._check_attributes_kept(sh)
        return ({n: q for n, q in stand.items()},
                {n: dict(sh.state[q]) for n, q in stand.items()}, changed)

    def _group_changes(self, before, sh):
        """Per group, {key: new value} of the Python numbers step() changes
        or adds in it (group state). step() may keep nothing else outside
        self.state[p]: another option or attribute it changes would be a
        constant of the captured step."""
        out = []
        for i, (b, g) in enumerate(zip(before, sh.param_groups)):
            changed = {}
            for k in set(b) | set(g):
                old, new = b.get(k, _MISSING), g.get(k, _MISSING)
                if k == "params" or _same(old, new):
                    continue
                number = isinstance(new, (int, float)) and not isinstance(new, bool) and \
                    (old is _MISSING or isinstance(old, (int, float)))
                if not number or k == "lr":
                    why = ("the LR is the step's runtime input" if k == "lr" else
                           "trainstep keeps Python numbers a group holds as state, and tensors "
                           "per parameter in self.state[p]")
                    raise UnsupportedOptimizer(
                        f"optimizer {self.name} ({self.source}): its step() changes param "
                        f"group {i}'s '{k}' ({b.get(k)!r} -> {g.get(k)!r}); {why}")
                changed[k] = new
            out.append(changed)
        return out

    def _check_attributes_kept(self, sh):
        for k, v in sh.__dict__.items():
            if k not in ("state", "param_groups") and k in self.opt.__dict__ \
                    and not _same(self.opt.__dict__[k], v):
                raise UnsupportedOptimizer(
                    f"optimizer {self.name} ({self.source}): its step() changes self.{k}; "
                    "trainstep traces state kept per parameter in self.state[p]")

    # --- the traced update -----------------------------------------------

    def _traced(self, params, grads, state, lr, fresh):
        """step() on traced values: (new params, new state tensors)."""
        lrs = [scalars.Scalar(lr if g.lr_scale == 1.0 else lr * g.lr_scale)
               for g in self.groups]
        tstate = {}
        if not fresh:
            for n in self.updated:
                tstate[n] = {k: (state[state_name(n, k)].clone() if kd.kind == "tensor"
                                 else scalars.Scalar(state[state_name(n, k)]))
                             for k, kd in self.layout[n].items()}
        values = {n: params[n] for n in self.updated}
        # A fresh first step sees each group as the user's (a lazy key absent).
        gstate = None if fresh else [
            {k: scalars.Scalar(state[group_state_name(i, k)]) for k in g.state}
            for i, g in enumerate(self.groups)]
        sh, stand = self._stand_in(values, grads, tstate, lrs, gstate=gstate)
        # Under trace.py's environment (the compiling flag, math on
        # Scalars).
        with scalars.ScalarMode(), torch.no_grad():
            sh.step()
        new_p, new_s = {}, {}
        for n, q in stand.items():
            new_p[n] = q
            st = sh.state[q]
            for k, kd in self.layout[n].items():
                if k not in st:
                    raise CaptureError(f"optimizer {self.name}: step() left no state "
                                       f"'{k}' for {n}, which its first step kept")
                new_s[state_name(n, k)] = self._traced_value(n, k, st[k], kd)
        for i, g in enumerate(self.groups):
            ng = sh.param_groups[i]
            for k, kd in g.state.items():
                if k not in ng:
                    raise CaptureError(f"optimizer {self.name}: step() left no '{k}' in param "
                                       f"group {i}, which its first step kept")
                new_s[group_state_name(i, k)] = self._traced_value(f"param group {i}", k,
                                                                   ng[k], kd)
        return new_p, new_s

    def _traced_value(self, n, k, v, kd):
        if kd.kind != "tensor":
            if isinstance(v, scalars.Scalar):
                return v.t
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return torch.full([], float(v), dtype=torch.float64)
        elif isinstance(v, torch.Tensor) and v.dtype == kd.dtype and tuple(v.shape) == kd.shape:
            return v
        got = (f"{str(v.dtype).replace('torch.', '')} {list(v.shape)}"
               if isinstance(v, torch.Tensor) else type(v).__name__)
        raise CaptureError(f"optimizer {self.name}: state '{k}' of {n} changes type from step "
                           f"to step ({kd.json()} first, then {got}); trainstep keeps one "
                           "type per state value")

    def update(self, params, grads, state, lr):
        """(new_params, new_state): the traced step(); both first and later
        steps, picked by the step count, where they differ."""
        lr = lr.to(torch.float64)
        new_p, new_s = self._traced(params, grads, state, lr, fresh=False)
        if self.first_step:
            first = state[STEP] == 0
            p0, s0 = self._traced(params, grads, state, lr, fresh=True)
            new_p = {n: torch.where(first, p0[n], v) for n, v in new_p.items()}
            new_s = {n: torch.where(first, s0[n], v) for n, v in new_s.items()}
        new_s[STEP] = state[STEP] + 1
        return new_p, new_s

    # --- state in torch's form and ours ----------------------------------

    def init_state(self, params):
        """State before the first step."""
        state = {STEP: torch.zeros((), dtype=torch.float32)}
        for n in self.updated:
            for k, kd in self.layout[n].items():
                state[state_name(n, k)] = _as_state(self.start[n][k], kd)
        for i, g in enumerate(self.groups):
            for k, kd in g.state.items():
                state[group_state_name(i, k)] = _as_state(g.start[k], kd)
        return state

    def state_from(self, handles, lookup, params, groups=None):
        """Our state from torch's (see optim.Optimizer.state_from); a
        parameter without torch state starts as before the first step.
        groups: torch's param groups (dicts), for the state kept in them."""
        state = self.init_state(params)
        steps = set()
        for i, (g, tg) in enumerate(zip(self.groups, groups or [])):
            for k, kd in g.state.items():
                if k in tg:
                    v = tg[k]
                    if isinstance(v, bool) or not isinstance(v, (int, float)):
                        raise UnsupportedOptimizer(
                            f"{self.name}: param group {i}'s '{k}' is a {type(v).__name__}, "
                            "the artifact keeps a number")
                    state[group_state_name(i, k)] = _as_state(v, kd)
                    if k == "step":
                        steps.add(int(v))
        for g, hs in zip(self.groups, handles):
            if len(hs) != len(g.params):
                raise UnsupportedOptimizer(
                    f"param group has {len(hs)} parameters, the artifact's has {len(g.params)}")
            for n, h in zip(g.params, hs):
                st = lookup.get(h) or {}
                if n not in g.updated or not st:
                    steps.add(0)
                    continue
                for k, kd in self.layout[n].items():
                    if k not in st:
                        raise UnsupportedOptimizer(f"{self.name}: {n}'s optimizer state has no "
                                                   f"'{k}'")
                    v = st[k]
                    if kd.kind == "tensor" and tuple(v.shape) != kd.shape:
                        raise UnsupportedOptimizer(
                            f"optimizer state '{k}' of {n} is {list(v.shape)}, the artifact's "
                            f"is {list(kd.shape)}")
                    state[state_name(n, k)] = _as_state(v, kd).to(
                        kd.dtype if kd.kind == "tensor" else torch.float64)
                steps.add(_steps_taken(st))
        if len(steps - {None}) > 1 and self.first_step:
            raise UnsupportedOptimizer(
                "parameters have taken different numbers of optimizer steps "
                f"({sorted(steps - {None})}); trainstep keeps one step count for all")
        known = [s for s in steps if s is not None]
        state[STEP] = torch.tensor(float(max(known) if known else 1 if None in steps else 0))
        return state

    def state_from_torch(self, opt, params):
        return self.state_from([g["params"] for g in opt.param_groups], opt.state, params,
                               opt.param_groups)

    def torch_state(self, tensors, n):
        """Parameter n's state as torch keeps it, from state tensors by name."""
        return {k: _as_torch(tensors[state_name(n, k)], kd) for k, kd in self.layout[n].items()}

    def torch_group_state(self, tensors, i, step):
        """Group i's own state as torch keeps it in the group; before the
        first step, without the keys step() adds."""
        g = self.groups[i]
        return {k: _as_torch(tensors[group_state_name(i, k)], kd) for k, kd in g.state.items()
                if step > 0 or k not in g.lazy}

    def to_json(self):
        g0 = self.groups[0]
        return {"type": self.name, "traced": True, "source": self.source,
                "lr": self.base_lr, "first_step": self.first_step,
                "state_at_start": self.state_at_start,
                "hyper": {k: v for k, v in g0.options.items()
                          if isinstance(v, (int, float, bool)) and k != "lr"},
                "defaults": _json_options(self.defaults),
                "groups": [{"params": g.params, "updated": g.updated, "lr_scale": g.lr_scale,
                            "options": _json_options(g.options),
                            "state": {k: kd.json() for k, kd in g.state.items()},
                            "lazy": g.lazy} for g in self.groups],
                "state": {n: {k: kd.json() for k, kd in ks.items()}
                          for n, ks in self.layout.items()}}


_MISSING = object()


def _same(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _steps_taken(st):
    """A torch state dict's own step count, or None where it keeps none."""
    v = st.get("step")
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        return int(v.item())
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return int(v)
    return None


def _json_options(opts):
    from .optim import _json_options as j
    return j(opts)
