"""Trace: the step function as one functional ATen graph (the pipeline's
second stage; see capture.py).

make_fx(functionalize(fn)) runs the step on real tensors under the tracing
environment (environment.py), lowering ops by decompositions.py's table;
the raw graph is then checked (checks.py), rewritten (rewrites.py), checked
again, and its strided reads made dense (views.py).
"""
from . import capture_errors, checks, environment, patches, rewrites, scalars, views
from .compat import functionalize, make_fx, mkldnn_off
from .decompositions import decomposition_table


def _environment():
    """The tracing environment (environment.py), one set of patches: the
    library stand-ins (patches.py); the tracer flags: libraries that ask
    whether they are traced (torch.compiler.is_compiling()) hear yes, and
    so does trainstep's own code (environment.tracing); and math keeps an
    optimizer's traced numbers traced (scalars.py)."""
    p = environment.tracing_flag(patches.stand_ins(environment.Patches()))
    return scalars.environment_patches(p)


@capture_errors.translated
def trace(fn, example):
    """fn(*example) as an FX graph of the runtime's ATen ops."""
    # Real-mode tracing executes the step: trace on clones so the user's
    # tensors are untouched.
    clones = [t.detach().clone() for t in example]
    # oneDNN's RNN path (2.x's CPU LSTM in training: mkldnn_rnn_layer) has
    # no runtime kernel; with it off, ATen runs the cells as plain ops.
    with _environment().applied(), mkldnn_off():
        gm = make_fx(functionalize(fn), decomposition_table=decomposition_table())(*clones)
    if checks.mutating_nodes(gm):
        # Some C++ composites (2.x's no-grad GRU cell: mul_, add_, tanh_)
        # reach make_fx below functionalize; a second pass over the traced
        # aten graph functionalizes what they left.
        gm = make_fx(functionalize(gm))(*[t.detach().clone() for t in example])
    checks.check_graph(gm)  # before the rewrites drop dead code (a dead nonzero too)
    rewrites.clean(gm)
    checks.check_functional(gm)
    views.densify(gm, example)
    return gm
