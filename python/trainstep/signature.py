"""A step function's signature, declared once.

Each group of inputs gives its ports (docs/format.md), its example values
and its place in the flat argument list the traced function unpacks; each
group of outputs gives its ports and its place in the flat result. The
capture functions declare the groups, and the ports, the example and the
unpacking all come from that one declaration, so they cannot drift apart.
"""
from types import SimpleNamespace

import torch


def tensor_meta(t):
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}


class _Group:
    """`shape`: how the group's slice of the flat arguments unpacks: "dict"
    (by `names`), "list", or "one" (a lone tensor)."""
    def __init__(self, key, ports, example, shape, names=None):
        self.key, self.ports, self.example, self.shape, self.names = key, ports, example, shape, names

    def take(self, values):
        if self.shape == "dict":
            return dict(zip(self.names, values))
        return list(values) if self.shape == "list" else values[0]


class StepInputs:
    def __init__(self):
        self._groups = []

    def _add(self, group):
        if any(g.key == group.key for g in self._groups):
            raise ValueError(f"input group '{group.key}' declared twice")
        self._groups.append(group)
        return self

    def state(self, key, names, kind, tensors):
        """State tensors of one kind (param, frozen, buffer, optim), by name."""
        names = list(names)
        ports = [dict(name=f"state/{n}", role="state", state=n, kind=kind, **tensor_meta(tensors[n]))
                 for n in names]
        return self._add(_Group(key, ports, [tensors[n] for n in names], "dict", names))

    def lr(self, value, dtype):
        """The learning rate, a 0-d tensor of `dtype`."""
        t = torch.tensor(value, dtype=dtype)
        return self._add(_Group("lr", [dict(name="lr", role="lr", **tensor_meta(t))], [t], "one"))

    def rng(self):
        """The Philox stream's seed and offset, 0-d int64."""
        z = torch.tensor(0, dtype=torch.int64)
        self._add(_Group("rng_seed", [dict(name="rng_seed", role="rng_seed", **tensor_meta(z))],
                         [z], "one"))
        return self._add(_Group("rng_offset",
                                [dict(name="rng_offset", role="rng_offset", **tensor_meta(z))],
                                [z.clone()], "one"))

    def batch(self, example, inputs, targets, layout):
        """The model inputs and the target tensors, each by index; batch_dim
        only where it is not 0."""
        def bd(d):
            return {"batch_dim": d} if d else {}

        def ports(role, names, tensors, dims):
            return [dict(name=names[i], role=role, index=i, **tensor_meta(x), **bd(d))
                    for i, (x, d) in enumerate(zip(tensors, dims))]
        self._add(_Group("inputs", ports("input", example.input_names, inputs, layout.inputs),
                         list(inputs), "list"))
        return self._add(_Group("targets", ports("target", example.target_names, targets,
                                                 layout.targets), list(targets), "list"))

    def grads(self, names, tensors, example):
        """Gradients by parameter name (apply_step), with example values."""
        names = list(names)
        ports = [dict(name=f"grad/{n}", role="grad", state=n, **tensor_meta(tensors[n]))
                 for n in names]
        return self._add(_Group("grads", ports, list(example), "dict", names))

    @property
    def ports(self):
        return [p for g in self._groups for p in g.ports]

    @property
    def example(self):
        return [x for g in self._groups for x in g.example]

    def unpack(self, flat):
        """The traced function's flat arguments, by group key."""
        if len(flat) != len(self.ports):
            raise ValueError(f"the step takes {len(self.ports)} arguments, got {len(flat)}")
        out, at = {}, 0
        for g in self._groups:
            n = len(g.ports)
            out[g.key] = g.take(flat[at:at + n])
            at += n
        return SimpleNamespace(**out)

    def drop_unused(self, gm, roles):
        """Removes the graph's placeholders of these roles that nothing reads,
        with their ports and example values (eval_step draws no RNG unless
        the model samples in eval mode)."""
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        it = iter(placeholders)
        for g in self._groups:
            keep = []
            for _ in g.ports:
                node = next(it)
                unused = g.ports[len(keep)]["role"] in roles and not node.users
                if unused:
                    gm.graph.erase_node(node)
                keep.append(not unused)
            g.ports = [p for p, k in zip(g.ports, keep) if k]
            g.example = [x for x, k in zip(g.example, keep) if k]
        self._groups = [g for g in self._groups if g.ports]
        gm.recompile()


class StepOutputs:
    def __init__(self):
        self._groups = []  # (key, ports, names or None)

    def loss(self):
        self._groups.append(("loss", [dict(role="loss")], None))
        return self

    def state(self, key, names):
        """New state tensors, from a dict by state name."""
        names = list(names)
        self._groups.append((key, [dict(role="state", state=n) for n in names], names))
        return self

    def grads(self, key, names):
        """Gradients, from a dict by parameter name."""
        names = list(names)
        self._groups.append((key, [dict(role="grad", state=n) for n in names], names))
        return self

    @property
    def ports(self):
        return [p for _, ports, _ in self._groups for p in ports]

    def pack(self, **values):
        """The flat result tuple, in port order, from each group's value."""
        missing = [k for k, _, _ in self._groups if k not in values]
        extra = set(values) - {k for k, _, _ in self._groups}
        if missing or extra:
            raise ValueError(f"outputs: missing {missing}, unexpected {sorted(extra)}")
        flat = []
        for key, _, names in self._groups:
            v = values[key]
            flat.extend([v[n] for n in names] if names is not None else [v])
        return tuple(flat)
