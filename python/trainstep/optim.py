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

import torch

STEP = "optim/step"


def state_name(param, key):
    return f"optim/{param}/{key}"


class FunctionalOptimizer:
    name = "?"
    # torch's per-parameter state keys this optimizer keeps (besides 'step').
    keys = ()
    # hyper-parameter -> (allowed values or None for any) checked at export.
    hyper = {}

    def __init__(self, group):
        self.h = {k: group[k] for k in self.hyper if k in group}
        for k, allowed in self.hyper.items():
            if allowed is not None and self.h.get(k) not in allowed:
                raise UnsupportedOptimizer(
                    f"{self.name}: {k}={self.h.get(k)!r} is not supported "
                    f"(supported: {sorted(allowed, key=str)})")
        self.base_lr = float(group["lr"])

    def init_state(self, params):
        """Zero state, as torch.optim has before the first step."""
        state = {STEP: torch.zeros((), dtype=torch.float32)}
        for n, p in params.items():
            for k in self.keys:
                state[state_name(n, k)] = torch.zeros_like(p)
        return state

    def update(self, params, grads, state, lr):
        """Returns (new_params, new_state); pure function of its inputs."""
        raise NotImplementedError

    def _effective_grad(self, p, g):
        """maximize, then weight decay, as every torch 1.13 optimizer does."""
        if self.h.get("maximize", False):
            g = -g
        wd = self.h.get("weight_decay", 0)
        return g + wd * p if wd != 0 else g

    def state_from_torch(self, torch_opt, names):
        """Our state dict from a torch optimizer's state, names in param order."""
        params = [p for g in torch_opt.param_groups for p in g["params"]]
        state = {}
        step = 0.0
        for n, p in zip(names, params):
            st = torch_opt.state.get(p, {})
            for k in self.keys:
                v = st.get(k)
                state[state_name(n, k)] = (v.detach().clone() if v is not None
                                           else torch.zeros_like(p))
            if "step" in st:
                step = float(st["step"])
        state[STEP] = torch.tensor(step, dtype=torch.float32)
        return state


class UnsupportedOptimizer(Exception):
    pass


class SGD(FunctionalOptimizer):
    name = "SGD"
    keys = ("momentum_buffer",)
    hyper = {"momentum": None, "dampening": None, "nesterov": None, "weight_decay": None,
             "maximize": None, "foreach": None, "differentiable": {False, None}}

    def init_state(self, params):
        state = super().init_state(params)
        if self.h.get("momentum", 0) == 0:  # torch keeps no buffer then
            state = {STEP: state[STEP]}
        return state

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

    def state_from_torch(self, torch_opt, names):
        s = super().state_from_torch(torch_opt, names)
        if self.h.get("momentum", 0) == 0:
            return {STEP: s[STEP]}
        return s


class Adadelta(FunctionalOptimizer):
    name = "Adadelta"
    keys = ("square_avg", "acc_delta")
    hyper = {"rho": None, "eps": None, "weight_decay": None, "maximize": None,
             "foreach": None, "differentiable": {False, None}}

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

    def __init__(self, group):
        super().__init__(group)
        self.keys = ("exp_avg", "exp_avg_sq") + (
            ("max_exp_avg_sq",) if self.h.get("amsgrad", False) else ())

    def update(self, params, grads, state, lr):
        beta1, beta2 = self.h["betas"]
        eps, wd = self.h["eps"], self.h.get("weight_decay", 0)
        step = state[STEP] + 1
        bc1 = _bias_correction(beta1, step)
        bc2 = _bias_correction(beta2, step)
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

    def __init__(self, group):
        super().__init__(group)
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

    def init_state(self, params):
        state = super().init_state(params)
        init = self.h.get("initial_accumulator_value", 0)
        for n, p in params.items():
            state[state_name(n, "sum")] = torch.full_like(p, init)
        return state

    def update(self, params, grads, state, lr):
        eps, decay = self.h["eps"], self.h.get("lr_decay", 0)
        step = state[STEP] + 1
        clr = lr / (1 + (step - 1) * decay) if decay != 0 else lr
        new_p, new_s = {}, {STEP: step}
        for n, p in params.items():
            g = self._effective_grad(p, grads[n])
            s = state[state_name(n, "sum")] + g * g
            new_s[state_name(n, "sum")] = s
            new_p[n] = p - clr * g / (s.sqrt() + eps)
        return new_p, new_s


SUPPORTED = {"SGD": SGD, "Adadelta": Adadelta, "Adam": Adam, "AdamW": AdamW,
             "RMSprop": RMSprop, "Adagrad": Adagrad}


def from_torch(opt):
    """The functional twin of a torch.optim instance (one param group)."""
    cls = SUPPORTED.get(type(opt).__name__)
    if cls is None:
        raise UnsupportedOptimizer(
            f"optimizer {type(opt).__name__} is not supported; supported: "
            + ", ".join(sorted(SUPPORTED)))
    if len(opt.param_groups) != 1:
        raise UnsupportedOptimizer(
            f"{type(opt).__name__}: {len(opt.param_groups)} parameter groups; "
            "only one group is supported so far")
    return cls(opt.param_groups[0])
