"""Out-of-place optimizer updates, traced into the step graph.

torch.optim cannot be traced as it is (lr is a Python float, `.item()` on
step counts, in-place updates), so each supported optimizer is rewritten
here as a pure function of (params, grads, state, lr, step) that follows the
torch 1.13 eager update expression by expression. Hyper-parameters come from
the user's optimizer object; lr is a 0-d tensor input so schedules need no
re-export. Tests compare these against torch.optim eager.

State names: "optim/<param name>/<torch state key>" per parameter, plus the
shared step counter "optim/step" (float32, steps taken so far).
"""
import math
from dataclasses import dataclass

import torch

STEP = "optim/step"


def state_name(param, key):
    return f"optim/{param}/{key}"


class FunctionalOptimizer:
    """One parameter group's update rule, following torch 1.13's
    single-tensor path for that optimizer."""
    name = "?"
    # torch's per-parameter state keys this rule keeps (besides 'step').
    keys = ()
    # hyper-parameter -> (allowed values or None for any) checked at export.
    hyper = {}
    # How torch 1.13 keeps a parameter's step: "tensor" (float32 0-d),
    # "int", or None (no step at all).
    torch_step = "tensor"

    def __init__(self, group, defaults=None):
        self.h = {k: group[k] for k in self.hyper if k in group}
        for k, allowed in self.hyper.items():
            if allowed is not None and self.h.get(k) not in allowed:
                raise UnsupportedOptimizer(
                    f"{self.name}: {k}={self.h.get(k)!r} is not supported "
                    f"(supported: {sorted(allowed, key=str)})")

    def init_param(self, p):
        """A parameter's state before its first step, as torch creates it."""
        return {k: torch.zeros_like(p) for k in self.keys}

    def update(self, params, grads, state, lr):
        """Returns (new_params, new_state); pure function of its inputs.
        `state` holds the shared STEP (steps taken before this one)."""
        raise NotImplementedError

    @staticmethod
    def _scalar(t, params):
        """A 0-d scalar (the float32 step count) in float64 when a parameter
        is float64: torch computes the step's scalars (bias corrections,
        decayed LRs) in Python floats, and float32 would round them."""
        if any(p.dtype == torch.float64 for p in params.values()):
            return t.to(torch.float64)
        return t

    def _effective_grad(self, p, g):
        """maximize, then weight decay, as every torch 1.13 optimizer does."""
        if self.h.get("maximize", False):
            g = -g
        wd = self.h.get("weight_decay", 0)
        return g + wd * p if wd != 0 else g


class UnsupportedOptimizer(Exception):
    pass


class SGD(FunctionalOptimizer):
    name = "SGD"
    hyper = {"momentum": None, "dampening": None, "nesterov": None, "weight_decay": None,
             "maximize": None, "foreach": None, "differentiable": {False, None}}
    torch_step = None  # SGD counts no steps; our STEP only says "buffers are set"

    def __init__(self, group, defaults=None):
        super().__init__(group, defaults)
        # torch keeps no buffer without momentum (it stores None).
        self.keys = ("momentum_buffer",) if self.h.get("momentum", 0) != 0 else ()

    def update(self, params, grads, state, lr):
        m = self.h.get("momentum", 0)
        damp = self.h.get("dampening", 0)
        first = state[STEP] == 0
        new_p, new_s = {}, {STEP: state[STEP] + 1}
        for n, p in params.items():
            d_p = self._effective_grad(p, grads[n])
            if m != 0:
                buf = state[state_name(n, "momentum_buffer")]
                # torch initialises the buffer to the first gradient.
                buf = torch.where(first, d_p, buf * m + (1 - damp) * d_p)
                new_s[state_name(n, "momentum_buffer")] = buf
                d_p = d_p + m * buf if self.h.get("nesterov", False) else buf
            new_p[n] = p - lr * d_p
        return new_p, new_s


class Adadelta(FunctionalOptimizer):
    name = "Adadelta"
    keys = ("square_avg", "acc_delta")
    hyper = {"rho": None, "eps": None, "weight_decay": None, "maximize": None,
             "foreach": None, "differentiable": {False, None}}
    torch_step = "int"

    def update(self, params, grads, state, lr):
        rho, eps = self.h["rho"], self.h["eps"]
        new_p, new_s = {}, {STEP: state[STEP] + 1}
        for n, p in params.items():
            g = self._effective_grad(p, grads[n])
            sq = state[state_name(n, "square_avg")] * rho + (1 - rho) * g * g
            acc = state[state_name(n, "acc_delta")]
            std = (sq + eps).sqrt()
            delta = (acc + eps).sqrt() / std * g
            acc = acc * rho + (1 - rho) * delta * delta
            new_s[state_name(n, "square_avg")] = sq
            new_s[state_name(n, "acc_delta")] = acc
            new_p[n] = p - lr * delta
        return new_p, new_s


def _bias_correction(beta, step):
    """1 - beta ** step for a float32 step tensor (torch 1.13's non-capturable
    path takes step.item() and computes this in float64).

    1 - beta ** step cancels badly near step 1 (beta2 = 0.999 in float32 is
    off by 1.3e-8 relative, which becomes ~1e-5 relative in 1 - beta2 ** 1),
    so this is -expm1(step * log(beta)), with log(beta) taken in float64:
    within ~2 float32 ulps of torch's float64 value rounded to float32
    (measured in tests/python/test_optim.py::test_bias_correction_precision).
    """
    return -torch.expm1(step * math.log(beta))


class Adam(FunctionalOptimizer):
    """torch 1.13 _single_tensor_adam, non-capturable path."""
    name = "Adam"
    hyper = {"betas": None, "eps": None, "weight_decay": None, "amsgrad": None,
             "maximize": None, "foreach": None, "capturable": {False, None},
             "differentiable": {False, None}, "fused": {False, None}}
    decoupled = False  # AdamW: decay the parameter instead of the gradient

    def __init__(self, group, defaults=None):
        super().__init__(group, defaults)
        self.keys = ("exp_avg", "exp_avg_sq") + (
            ("max_exp_avg_sq",) if self.h.get("amsgrad", False) else ())

    def update(self, params, grads, state, lr):
        beta1, beta2 = self.h["betas"]
        eps, wd = self.h["eps"], self.h.get("weight_decay", 0)
        step = state[STEP] + 1
        step_f = self._scalar(step, params)
        bc1 = _bias_correction(beta1, step_f)
        bc2 = _bias_correction(beta2, step_f)
        step_size = lr / bc1
        bc2_sqrt = bc2.sqrt()
        new_p, new_s = {}, {STEP: step}
        for n, p in params.items():
            g = grads[n]
            if self.h.get("maximize", False):
                g = -g
            if self.decoupled:
                p = p * (1 - lr * wd)
            elif wd != 0:
                g = g + wd * p
            m = state[state_name(n, "exp_avg")] * beta1 + (1 - beta1) * g
            v = state[state_name(n, "exp_avg_sq")] * beta2 + (1 - beta2) * g * g
            new_s[state_name(n, "exp_avg")] = m
            new_s[state_name(n, "exp_avg_sq")] = v
            if self.h.get("amsgrad", False):
                v = torch.maximum(state[state_name(n, "max_exp_avg_sq")], v)
                new_s[state_name(n, "max_exp_avg_sq")] = v
            denom = v.sqrt() / bc2_sqrt + eps
            new_p[n] = p - step_size * m / denom
        return new_p, new_s


class AdamW(Adam):
    """torch 1.13 _single_tensor_adamw: p *= 1 - lr * weight_decay first."""
    name = "AdamW"
    decoupled = True
    hyper = dict(Adam.hyper)
    del hyper["fused"]


class RMSprop(FunctionalOptimizer):
    """torch 1.13 _single_tensor_rmsprop."""
    name = "RMSprop"
    hyper = {"alpha": None, "eps": None, "weight_decay": None, "momentum": None,
             "centered": None, "maximize": None, "foreach": None,
             "differentiable": {False, None}}
    torch_step = "int"

    def __init__(self, group, defaults=None):
        super().__init__(group, defaults)
        self.keys = ("square_avg",) + (
            ("momentum_buffer",) if self.h.get("momentum", 0) > 0 else ()) + (
            ("grad_avg",) if self.h.get("centered", False) else ())

    def update(self, params, grads, state, lr):
        alpha, eps, mom = self.h["alpha"], self.h["eps"], self.h.get("momentum", 0)
        new_p, new_s = {}, {STEP: state[STEP] + 1}
        for n, p in params.items():
            g = self._effective_grad(p, grads[n])
            sq = state[state_name(n, "square_avg")] * alpha + (1 - alpha) * g * g
            new_s[state_name(n, "square_avg")] = sq
            if self.h.get("centered", False):
                ga = state[state_name(n, "grad_avg")] * alpha + (1 - alpha) * g
                new_s[state_name(n, "grad_avg")] = ga
                avg = (sq - ga * ga).sqrt()
            else:
                avg = sq.sqrt()
            avg = avg + eps
            if mom > 0:
                buf = state[state_name(n, "momentum_buffer")] * mom + g / avg
                new_s[state_name(n, "momentum_buffer")] = buf
                new_p[n] = p - lr * buf
            else:
                new_p[n] = p - lr * g / avg
        return new_p, new_s


class Adagrad(FunctionalOptimizer):
    """torch 1.13 _single_tensor_adagrad (dense gradients)."""
    name = "Adagrad"
    keys = ("sum",)
    hyper = {"lr_decay": None, "weight_decay": None, "initial_accumulator_value": None,
             "eps": None, "maximize": None, "foreach": None}

    def __init__(self, group, defaults=None):
        super().__init__(group, defaults)
        # torch fills "sum" in __init__ from the constructor's argument, not
        # from the group's (a group's own initial_accumulator_value is unused).
        self.init_value = (defaults or group).get("initial_accumulator_value", 0)

    def init_param(self, p):
        return {"sum": torch.full_like(p, self.init_value)}

    def update(self, params, grads, state, lr):
        eps, decay = self.h["eps"], self.h.get("lr_decay", 0)
        step = state[STEP] + 1
        step_f = self._scalar(step, params)
        clr = lr / (1 + (step_f - 1) * decay) if decay != 0 else lr
        new_p, new_s = {}, {STEP: step}
        for n, p in params.items():
            g = self._effective_grad(p, grads[n])
            s = state[state_name(n, "sum")] + g * g
            new_s[state_name(n, "sum")] = s
            new_p[n] = p - clr * g / (s.sqrt() + eps)
        return new_p, new_s


SUPPORTED = {"SGD": SGD, "Adadelta": Adadelta, "Adam": Adam, "AdamW": AdamW,
             "RMSprop": RMSprop, "Adagrad": Adagrad}


def rule_class(opt):
    cls = SUPPORTED.get(type(opt).__name__)
    if cls is None:
        raise UnsupportedOptimizer(
            f"optimizer {type(opt).__name__} is not supported; supported: "
            + ", ".join(sorted(SUPPORTED)))
    return cls


def check_group_options(name, i, g):
    """Refuses param group options a scheduler changes every step: the
    captured step keeps them constant."""
    if "max_momentum" in g or "base_momentum" in g:
        raise UnsupportedOptimizer(
            f"{name}: param group {i} is driven by OneCycleLR(cycle_momentum=True), "
            "which changes momentum/beta1 every step; momentum is a constant of the "
            "captured step. Use OneCycleLR(..., cycle_momentum=False), or none, and "
            "`trainstep train --lr-schedule onecycle:...` (it cycles the LR only)")


def lr_scale(name, i, g, base_lr):
    """Group i's LR as a multiple of group 0's (the runtime LR input)."""
    lr = float(g["lr"])
    if lr == base_lr:
        return 1.0
    if base_lr == 0:
        raise UnsupportedOptimizer(
            f"{name}: param group 0 has lr=0 but group {i} has lr={lr}; group "
            "LRs are multiples of group 0's, so group 0's LR must not be 0")
    return lr / base_lr


@dataclass
class Group:
    """One torch param group: its rule, its parameters (every one, in torch's
    order: torch's state_dict numbers them across groups in this order),
    the ones the step updates, its LR as a multiple of the runtime LR, and
    torch's group options (for torch optimizer state_dicts)."""
    rule: FunctionalOptimizer
    params: list
    updated: list
    lr_scale: float
    options: dict


class Optimizer:
    """A torch optimizer's functional twin: one rule per param group and one
    shared step counter (STEP).

    The step has a single runtime `lr` input: group 0's LR. Group i updates
    with lr * (lr_i / lr_0), its ratio fixed at export, so a schedule on the
    runtime LR scales every group alike (docs/optimizers.md).
    """

    def __init__(self, opt, names, updated=None):
        """names: per torch param group, the state name of each parameter;
        updated: the names the step updates (default: all)."""
        cls = rule_class(opt)
        self.name = cls.name
        self.torch_step = cls.torch_step
        groups = opt.param_groups
        self.base_lr = float(groups[0]["lr"])
        self.defaults = {k: v for k, v in opt.defaults.items() if k != "params"}
        self.groups = []
        for i, (g, gnames) in enumerate(zip(groups, names)):
            check_group_options(self.name, i, g)
            rule = cls(g, opt.defaults)
            scale = lr_scale(self.name, i, g, self.base_lr)
            upd = [n for n in gnames if updated is None or n in updated]
            opts = {k: v for k, v in g.items() if k != "params"}
            self.groups.append(Group(rule, list(gnames), upd, scale, opts))

    @classmethod
    def from_json(cls, j):
        """The optimizer an artifact's program JSON describes (to_json)."""
        self = cls.__new__(cls)
        rule_cls = SUPPORTED.get(j.get("type"))
        if rule_cls is None or "groups" not in j:
            raise UnsupportedOptimizer(f"the artifact's optimizer {j.get('type')!r} has no "
                                       "param groups recorded (re-export it)")
        self.name, self.torch_step = rule_cls.name, rule_cls.torch_step
        self.base_lr = float(j["lr"])
        defaults = _py_options(j.get("defaults", {}))
        self.defaults = defaults
        self.groups = []
        for g in j["groups"]:
            opts = _py_options(g["options"])
            self.groups.append(Group(rule_cls(opts, defaults or opts), list(g["params"]),
                                     list(g["updated"]), float(g["lr_scale"]), opts))
        return self

    @property
    def updated(self):
        return [n for g in self.groups for n in g.updated]

    def init_state(self, params):
        """State before the first step, as torch.optim has it."""
        state = {STEP: torch.zeros((), dtype=torch.float32)}
        for g in self.groups:
            for n in g.updated:
                for k, v in g.rule.init_param(params[n]).items():
                    state[state_name(n, k)] = v
        return state

    def update(self, params, grads, state, lr):
        """(new_params, new_state) for the updated parameters: pure."""
        new_p, new_s = {}, {}
        for g in self.groups:
            if not g.updated:
                continue
            ps = {n: params[n] for n in g.updated}
            glr = lr if g.lr_scale == 1.0 else lr * g.lr_scale
            p, s = g.rule.update(ps, grads, state, glr)
            new_p.update(p)
            new_s.update(s)  # every group computes the same new STEP
        if STEP not in new_s:
            new_s[STEP] = state[STEP] + 1
        return new_p, new_s

    def state_from(self, handles, lookup, params, groups=None):
        """Our state from torch's: handles[i] are torch's keys for group i's
        parameters (the Parameters of a live optimizer, or the ints of a
        state_dict), lookup maps a key to that parameter's torch state.
        Missing state is the initial state. One step count for all: torch's
        per-parameter steps must agree. (groups, torch's param groups, is
        for a traced optimizer's state kept in them: the six rules keep
        none.)"""
        state, steps = {}, {}
        for g, hs in zip(self.groups, handles):
            if len(hs) != len(g.params):
                raise UnsupportedOptimizer(
                    f"param group has {len(hs)} parameters, the artifact's has {len(g.params)}")
            for n, h in zip(g.params, hs):
                if n not in g.updated:
                    continue
                st = lookup.get(h) or {}
                init = g.rule.init_param(params[n])
                for k in g.rule.keys:
                    v = st.get(k)
                    if v is not None and tuple(v.shape) != tuple(params[n].shape):
                        raise UnsupportedOptimizer(
                            f"optimizer state '{k}' of {n} is {list(v.shape)}, the parameter "
                            f"is {list(params[n].shape)}")
                    # In the parameter's dtype, as torch keeps it.
                    state[state_name(n, k)] = (v.detach().clone().to(params[n].dtype)
                                               if v is not None else init[k])
                if "step" in st:
                    steps[n] = float(st["step"])
                elif any(st.get(k) is not None for k in g.rule.keys):
                    steps[n] = None  # SGD: buffers set, step not counted
                elif g.rule.keys or g.rule.torch_step:
                    steps[n] = 0.0
        counted = {v for v in steps.values() if v is not None}
        if len(counted) > 1:
            raise UnsupportedOptimizer(
                "parameters have taken different numbers of optimizer steps "
                f"({sorted(counted)}); trainstep keeps one step count for all")
        step = counted.pop() if counted else 0.0
        if None in steps.values():
            if 0.0 in steps.values():
                raise UnsupportedOptimizer(
                    "some parameters have a momentum buffer and some do not; trainstep "
                    "sets all buffers on the same step")
            step = max(step, 1.0)
        state[STEP] = torch.tensor(step, dtype=torch.float32)
        return state

    def state_from_torch(self, opt, params):
        """Our state from a live torch optimizer with the same groups."""
        return self.state_from([g["params"] for g in opt.param_groups], opt.state, params)

    def to_json(self):
        g0 = self.groups[0]
        return {"type": self.name, "lr": self.base_lr,
                "hyper": {k: v for k, v in g0.rule.h.items() if isinstance(v, (int, float, bool))},
                "defaults": _json_options(self.defaults),
                "groups": [{"params": g.params, "updated": g.updated, "lr_scale": g.lr_scale,
                            "options": _json_options(g.options)} for g in self.groups]}


def _json_options(opts):
    out = {}
    for k, v in opts.items():
        if isinstance(v, tuple):
            v = list(v)
        if isinstance(v, float) and not math.isfinite(v):
            v = repr(v)
        if v is None or isinstance(v, (bool, int, float, str, list)):
            out[k] = v
    return out


def _py_options(j):
    """Inverse of _json_options: lists were tuples (betas), strings like
    'inf' were non-finite floats."""
    out = {}
    for k, v in j.items():
        if isinstance(v, list):
            v = tuple(v)
        elif v in ("inf", "-inf", "nan"):
            v = float(v)
        out[k] = v
    return out


def from_torch(opt, names=None, updated=None):
    """The functional twin of a torch.optim instance; names default to
    p0, p1, ... in parameter order."""
    if names is None:
        k = iter(range(10 ** 9))
        names = [[f"p{next(k)}" for _ in g["params"]] for g in opt.param_groups]
    return Optimizer(opt, names, updated)
