"""Model outputs, inputs and targets of any structure: a tensor, or
tuples, lists, dicts, namedtuples and dataclasses of them, nested. The
eval step returns the tensor leaves, each named by its path ("output",
"output/0", "output/mu", "output/0/h"), and the model and loss function
still receive the structures the user built (Example: the batch).

torch.utils._pytree is not used: its namedtuple and dataclass support and
its key paths differ between torch 1.13 and 2.x, and the names here are
part of the artifact format.
"""
import dataclasses

import torch


class Structure:
    """The shape of one output: `names` of its tensor leaves, and `build`,
    which puts new leaves (same order) back into the structure. Leaves that
    are not tensors (None, ints) are kept as they were."""

    def __init__(self, names, build):
        self.names = names
        self.build = build


def flatten(obj, prefix="output"):
    """(leaves, Structure). Raises TypeError naming the path of a value that
    is neither a tensor, a container above, nor a plain constant."""
    leaves, names = [], []
    build = _walk(obj, prefix, leaves, names)
    return leaves, Structure(names, lambda new: build(iter(new)))


def _walk(obj, path, leaves, names):
    if isinstance(obj, torch.Tensor):
        leaves.append(obj)
        names.append(path)
        return lambda it: next(it)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return lambda it: obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        subs = [_walk(v, f"{path}/{f}", leaves, names) for f, v in zip(obj._fields, obj)]
        return lambda it: type(obj)(*[s(it) for s in subs])
    if isinstance(obj, (tuple, list)):
        subs = [_walk(v, f"{path}/{i}", leaves, names) for i, v in enumerate(obj)]
        return lambda it: type(obj)(s(it) for s in subs)
    if isinstance(obj, dict):
        keys = list(obj)
        subs = [_walk(obj[k], f"{path}/{k}", leaves, names) for k in keys]
        return lambda it: type(obj)((k, s(it)) for k, s in zip(keys, subs))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [f.name for f in dataclasses.fields(obj)]
        subs = [_walk(getattr(obj, f), f"{path}/{f}", leaves, names) for f in fields]
        return lambda it: dataclasses.replace(obj, **{f: s(it) for f, s in zip(fields, subs)})
    raise TypeError(f"{path} is a {type(obj).__qualname__}; a model output may hold tensors, "
                    "tuples, lists, dicts, namedtuples, dataclasses and plain constants")



# Names a model input's port may not take: the other ports' and groups'.
_RESERVED = {"target", "lr", "rng_seed", "rng_offset", "state", "grad", "output", "loss"}


def port_prefixes(n, arg_names):
    """The path prefix of each of n model inputs: forward's parameter name
    where it is a plain identifier that names no other port, else
    "input{i}"."""
    out = []
    for i in range(n):
        name = arg_names[i] if arg_names and i < len(arg_names) else None
        ok = (isinstance(name, str) and name.isidentifier() and name not in _RESERVED
              and not name.startswith("input") and name not in out)
        out.append(name if ok else f"input{i}")
    return out


def forward_arg_names(model):
    """The names of model.forward's positional parameters, in order, up to a
    *args; None where they cannot be read."""
    import inspect
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError, AttributeError):
        return None
    names = []
    for p in params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names


class Example:
    """The example batch as tensor leaves. Each model input and the target
    may be any structure flatten() takes (a dict of token ids and masks, a
    tuple of images); the runtime sees one port per tensor leaf, named by
    its path. An input's path starts with the name of forward's parameter
    that takes it (`arg_names`: "input_ids", "batch/mask"), else with its
    position ("input0", "input1/mask"); the target's is "target",
    "target/labels". A plain tensor keeps the plain name.

    `args(leaves)` and `target(leaves)` rebuild what model(*args) and
    loss_fn(output, target) receive from new leaves (traced values, a
    permuted golden batch, one sample)."""

    def __init__(self, inputs, target, arg_names=None):
        self.input_leaves, self.input_names, self._inputs = [], [], []
        self._input_index = []  # of each input leaf, for messages
        names = port_prefixes(len(inputs), arg_names)
        for i, x in enumerate(inputs):
            leaves, st = flatten(x, prefix=names[i])
            self.input_leaves += leaves
            self.input_names += st.names
            self._input_index += [(i, names[i])] * len(leaves)
            self._inputs.append((len(leaves), st))
        self.target_leaves, self._target = flatten(target, prefix="target")
        self.target_names = self._target.names
        self.flat = [False] * len(self.target_leaves)  # unflatten_target()

    def unflatten_target(self, i, sizes):
        """Target leaf i is flattened over (seq, batch), as a language
        model's training loop flattens it: its leaf becomes (seq, batch,
        ...), so the batch has a dim of its own (the runtime's data path, the
        golden permutations), and target() flattens it back, so loss_fn
        sees the shape the user gave."""
        t = self.target_leaves[i]
        self.target_leaves[i] = t.reshape(*sizes, *t.shape[1:])
        self.flat[i] = True

    def args(self, leaves):
        """The model's positional arguments from input leaves."""
        it, out = iter(leaves), []
        for n, st in self._inputs:
            out.append(st.build([next(it) for _ in range(n)]))
        return tuple(out)

    def target(self, leaves):
        return self._target.build([t.flatten(0, 1) if flat else t
                                   for t, flat in zip(leaves, self.flat)])

    def described(self):
        """(what, tensor) of every input leaf, then every target leaf, as
        messages name them: "example input 0", "example input 1 at mask",
        "the example target", "the example target at labels"."""
        def what(name, head, prefix):
            rest = name[len(prefix):].lstrip("/")
            return f"{head} at {rest}" if rest else head
        out = []
        for name, t, (i, prefix) in zip(self.input_names, self.input_leaves, self._input_index):
            out.append((what(name, f"example input {i}", prefix), t))
        for name, t in zip(self.target_names, self.target_leaves):
            out.append((what(name, "the example target", "target"), t))
        return out
