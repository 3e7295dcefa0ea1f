"""Where each traced node came from: the module path and the user's source
line, recorded while make_fx traces the step.

torch 1.13's make_fx records neither (no nn_module_stack, no stack traces
from its tracer), so during capture we keep a module stack with global
forward hooks and stamp every call_function node the tracer creates with
the innermost module and the innermost frame outside torch, functorch and
trainstep (the user's line). On torch 2.x the same hooks work; whatever
2.x recorded itself (nn_module_stack, stack_trace) is the fallback.

Backward nodes run with no module on the stack and no user frame, and the
loss and optimizer are called from trainstep itself, so those nodes carry
no provenance unless user code (a loss written in the spec) made them.
"""
import contextlib
import linecache
import os
import sys

import torch
from torch.fx.experimental.proxy_tensor import PythonKeyTracer

META = "trainstep_source"


_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _skip_dirs():
    dirs = [os.path.dirname(torch.__file__), os.path.dirname(contextlib.__file__)]
    try:
        import functorch
        dirs.append(os.path.dirname(functorch.__file__))
    except ImportError:
        pass
    return tuple(d + os.sep for d in dirs)


_SKIP = _skip_dirs()


def _user_frame():
    """(file, line, function) of the innermost user frame called from the
    captured step: the walk stops at trainstep's own frames (capture,
    optimizer), so the loss and the update find none."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if fn.startswith(_OURS):
            return None
        if not fn.startswith(_SKIP) and not fn.startswith("<"):
            return fn, f.f_lineno, f.f_code.co_name
        f = f.f_back
    return None


@contextlib.contextmanager
def recording(model):
    """Within this block, nodes traced by make_fx get meta[META] =
    {"module": path or "", "module_type", "file", "line", "function"}
    (keys present only when known)."""
    # Types as the user wrote them (functional_call on 1.13 swaps classes).
    names = {id(m): (n, type(m).__name__) for n, m in model.named_modules()}
    stack = []

    def pre(mod, args):
        stack.append(mod)

    def post(mod, args, out):
        if stack and stack[-1] is mod:
            stack.pop()

    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(pre),
             torch.nn.modules.module.register_module_forward_hook(post)]
    own = "create_node" in PythonKeyTracer.__dict__
    orig = PythonKeyTracer.create_node

    def create_node(self, kind, target, *args, **kwargs):
        node = orig(self, kind, target, *args, **kwargs)
        if kind == "call_function":
            src = {}
            mod = next((m for m in reversed(stack) if id(m) in names), None)
            if mod is not None:
                src.update(module=names[id(mod)][0], module_type=names[id(mod)][1])
            frame = _user_frame()
            if frame:
                src.update(file=frame[0], line=frame[1], function=frame[2])
            if src:
                node.meta[META] = src
        return node

    PythonKeyTracer.create_node = create_node
    try:
        yield
    finally:
        if own:
            PythonKeyTracer.create_node = orig
        else:
            del PythonKeyTracer.create_node
        for h in hooks:
            h.remove()


def of_node(n):
    """The node's provenance as a dict (see recording), from our record or
    from what torch 2.x records (nn_module_stack, stack_trace); {} if none."""
    src = dict(n.meta.get(META) or {})
    if "module" not in src and n.meta.get("nn_module_stack"):
        path, typ = list(n.meta["nn_module_stack"].values())[-1]
        src.update(module=path, module_type=getattr(typ, "__name__", str(typ)))
    if "file" not in src and n.meta.get("stack_trace"):
        lines = [l.strip() for l in n.meta["stack_trace"].strip().splitlines()
                 if l.strip().startswith("File")]
        if lines:  # 'File "x.py", line 12, in forward'
            parts = lines[-1].split(",")
            try:
                src.update(file=parts[0].split('"')[1], line=int(parts[1].split()[-1]),
                           function=parts[2].split()[-1])
            except (IndexError, ValueError):
                pass
    return src


def describe(src, with_code=True):
    """One line: "module 'features' (SpectralFeatures), spec.py:17 in forward: <code>"."""
    parts = []
    if "module_type" in src:
        path = src.get("module") or ""
        parts.append(f"module '{path}' ({src['module_type']})" if path
                     else f"the top-level module ({src['module_type']})")
    if "file" in src:
        where = f"{src['file']}:{src['line']} in {src.get('function', '?')}"
        code = linecache.getline(src["file"], src["line"]).strip() if with_code else ""
        parts.append(where + (f": {code}" if code else ""))
    return ", ".join(parts)
