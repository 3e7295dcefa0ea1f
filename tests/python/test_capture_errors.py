"""What the capture cannot take fails the export with one line naming the
cause, the user's FILE:LINE and the way out (capture_errors.py), the same
under torch 1.13 and 2.x: whichever interpreter runs pytest exports."""
import pytest
import torch

from conftest import run
from test_errors import _line_of, _one_line_error

SPEC = """import torch
import torch.nn as nn
import torch.nn.functional as F
import trainstep


class Tagged(torch.Tensor):
    pass


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        {init}

    def forward(self, x):
        {body}
        return F.log_softmax(self.fc(x), dim=1)


def build():
    m = Net()
    x, y = torch.randn(2, 4), torch.randint(0, 3, (2,))
    {batch}
    return trainstep.TrainSpec(m, F.nll_loss, torch.optim.SGD(m.parameters(), lr=0.1), (x,), y)
"""


def _spec(init="pass", body="pass", batch="pass"):
    return SPEC.format(init=init, body=body, batch=batch)


def _export_error(tmp_path, text, *needles, at):
    """The export's one line: SPEC:LINE of `at`, then every needle."""
    spec = tmp_path / "spec.py"
    spec.write_text(text)
    out = tmp_path / "x.tstep"
    p = run("export", spec, "--out", out, check=False)
    line = _one_line_error(p, *needles, prefix="trainstep export: ")
    assert line.startswith(f"trainstep export: {spec}:{_line_of(text, at)}: "), line
    assert not out.exists()
    return line


BRANCH = "if x.sum() > 0:\n            x = x * 2"
WHILE = "while x.abs().max() > 1:\n            x = x / 2"


@pytest.mark.parametrize("body,at", [(BRANCH, "if x.sum() > 0:"),
                                     (WHILE, "while x.abs().max() > 1:"),
                                     ("assert x.isfinite().all()", "assert")])
def test_data_dependent_control_flow(tmp_path, body, at):
    _export_error(tmp_path, _spec(body=body), "data-dependent control flow", f"`{at}",
                  "branches on a tensor's value", "torch.where(cond, a, b)",
                  "move the decision out of the step", at=at)


@pytest.mark.parametrize("read", [".item()", ".tolist()", "float()", "int()", "bool()"])
def test_value_read(tmp_path, read):
    """.item(), .tolist() and float/int/bool(t): one class, the call named."""
    expr = f"x.sum(){read}" if read.startswith(".") else f"{read[:-1]}x.sum() > 0)"
    body = f"x = x * {expr}"
    _export_error(tmp_path, _spec(body=body), f"tensor value read in the step: `{body}` "
                  f"calls {read}", "keep it a tensor", "outside the step", at=body)


def test_value_read_in_the_spec_loss(tmp_path):
    text = _spec().replace("F.nll_loss, torch.optim", "loss, torch.optim").replace(
        "def build():", "def loss(out, y):\n    l = F.nll_loss(out, y)\n"
        "    return l / l.item()\n\n\ndef build():")
    _export_error(tmp_path, text, "calls .item()", at="return l / l.item()")


def test_data_dependent_shape_is_not_baked_in(tmp_path):
    """Only the count survives in the graph; before, it exported silently."""
    body = "x = x * x.nonzero().shape[0]"
    _export_error(tmp_path, _spec(body=body), "data-dependent shape", f"`{body}`",
                  "aten.nonzero", "fixed-size form", "torch.where(mask, x, 0)", at=body)


MASKS = ('self.register_buffer("mask", torch.tensor([[True, False, True, False], '
         '[False, False, True, False]]))\n        '
         'self.register_buffer("rows", torch.tensor([True, False]))\n        '
         'self.register_buffer("src", torch.randn(3))')


@pytest.mark.parametrize("body,at,what", [
    ("x = x + x[self.mask].sum()", "x = x + x[self.mask].sum()", "reads"),
    # The values' read x.exp()[mask] is what cannot be captured.
    ("h = x * 2\n        h[self.mask] = x.exp()[self.mask]\n        x = x + h",
     "h[self.mask] =", "reads"),
    # Values sized by the count of True, or a mask with an index tensor:
    # the index_put stays whole, and the runtime would refuse it on load.
    ("h = x * 2\n        h[self.mask] = self.src\n        x = x + h", "h[self.mask] =",
     "writes"),
    ("h = x * 2\n        h[self.rows, torch.tensor([1])] = 0.0\n        x = x + h",
     "h[self.rows,", "writes"),
])
def test_boolean_mask_index(tmp_path, body, at, what):
    """x[mask] has one element per True: refused at export with the line,
    whether it is read or written (a write whose values broadcast is a
    where(), tests/python/specs/real/index_patterns.py)."""
    line = _export_error(tmp_path, _spec(init=MASKS, body=body), "data-dependent shape",
                         f"{what} x[mask] with a boolean mask", "torch.where(mask, v, x)",
                         "a v that broadcasts", at=at)
    assert ("(aten.index.Tensor)" if what == "reads" else "(aten.index_put)") in line, line


@pytest.mark.parametrize("body,at,mode", [
    ("x.add_(1)", "x.add_(1)", ""),
    ("x[:, 0] = 0", "x[:, 0] = 0", ""),
    ("x += 1", "x += 1", ""),
    ("x.view(-1).mul_(2)", "x.view(-1).mul_(2)", ""),
    # Eval only: 1.13 dropped the write silently, 2.x left a copy_.
    ("if not self.training:\n            x.add_(1)", "x.add_(1)", " in eval mode"),
])
def test_in_place_write_to_the_input(tmp_path, body, at, mode):
    _export_error(tmp_path, _spec(body=body), "in-place write to the step's input",
                  f"`{at}` modifies example input 0{mode}", "read-only",
                  "out-of-place op", "x = x.clone()", at=at)


def test_tensor_subclass_parameter(tmp_path):
    init = "self.scale = nn.Parameter(torch.ones(4).as_subclass(Tagged))"
    _export_error(tmp_path, _spec(init=init, body="x = x * self.scale"),
                  "unsupported tensor subclass: parameter 'scale' is a Tagged",
                  "t.as_subclass(torch.Tensor)", at=init)


@pytest.mark.parametrize("batch,what", [("x = x.as_subclass(Tagged)", "example input 0"),
                                        ("y = y.as_subclass(Tagged)", "the example target")])
def test_tensor_subclass_in_the_batch(tmp_path, batch, what):
    _export_error(tmp_path, _spec(batch=batch), f"unsupported tensor subclass: {what} is a "
                  "Tagged", "t.as_subclass(torch.Tensor)", at="def build():")


def test_flattened_target_needs_its_batch_dim(tmp_path):
    """(seq, batch) inputs with a target flattened over both
    (word_language_model's data) export with the batch dim declared
    (tests/python/specs/flat_target.py); undeclared, which of the two is the
    batch cannot be told: one line at build() saying how to declare it."""
    _export_error(tmp_path, _spec(batch="x, y = torch.randn(5, 4), torch.randint(0, 3, (20,))"),
                  "the example target (flattened to [20]) is the example batch's first two "
                  "dims [5, 4] flattened", "TrainSpec(batch_dims=1) for (seq, batch) data",
                  at="def build():")


@pytest.mark.parametrize("dims,needle", [
    ("batch_dims=(1, 0)", "batch_dims has 2 entries for 1 example input(s)"),
    ("batch_dims=2", "batch dimension 2 of example input 0 is out of range for its shape [5, 4]"),
    ("batch_dims=1, target_batch_dim=0",
     "batch dimension: example input 0 has 4 samples on its batch dim 1 (shape [5, 4]) but the "
     "example target has 5 on dim 0")])
def test_declared_batch_dims_are_checked(tmp_path, dims, needle):
    text = _spec(batch="x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))")
    text = text.replace(", (x,), y)", f", (x,), y, {dims})")
    assert dims in text
    _export_error(tmp_path, text, needle, at="def build():")


def test_plain_tensor_attribute(tmp_path):
    """A tensor attribute that is neither a parameter nor a buffer."""
    _export_error(tmp_path, _spec(init="self.scale = torch.full((4,), 2.0)",
                                  body="x = x * self.scale"),
                  "neither an input, a parameter nor a buffer", "shape [4], float32",
                  "self.register_buffer(name, tensor)", at="x = x * self.scale")


def test_parameter_from_metadata_only_is_taken(tmp_path):
    """weight.new_zeros(...) of `next(self.parameters())` (word_language_model's
    init_hidden) needs only the dtype: exported and verified under both torches."""
    spec = tmp_path / "spec.py"
    spec.write_text(_spec(body="x = x + next(self.parameters()).new_zeros(x.shape)"))
    run("export", spec, "--out", tmp_path / "x.tstep")
    assert run("verify", tmp_path / "x.tstep").stdout.strip().endswith("verify: ok")


def test_parameter_read_outside_its_module(tmp_path):
    """Computing with next(self.parameters()): 2.x's functional_call hands the
    traced parameter, so it exports and verifies; 1.13's hands the module's
    own, whose gradient the capture would lose, so it is refused."""
    body = "x = x + (x @ next(self.parameters()).t()).sum()"
    text = _spec(body=body)
    if int(torch.__version__.split(".")[0]) >= 2:
        spec = tmp_path / "spec.py"
        spec.write_text(text)
        run("export", spec, "--out", tmp_path / "x.tstep")
        assert run("verify", tmp_path / "x.tstep").stdout.strip().endswith("verify: ok")
    else:
        _export_error(tmp_path, text, "a parameter (shape [3, 4], float32) is read other than "
                      "through its module's attribute", "its gradient would be lost",
                      "self.layer.weight", at=body)


def test_the_line_is_in_the_model_file(tmp_path):
    """A model imported from its own file: that file's line, not the spec's."""
    model = tmp_path / "mymodel.py"
    text = _spec(body=BRANCH)
    model.write_text(text)
    spec = tmp_path / "spec.py"
    spec.write_text("from mymodel import build\n")
    p = run("export", spec, "--out", tmp_path / "x.tstep", check=False)
    line = _one_line_error(p, "data-dependent control flow", prefix="trainstep export: ")
    assert f"{model}:{_line_of(text, 'if x.sum() > 0:')}: " in line, line


def test_zero_dim_tensor_attribute_is_still_refused(tmp_path):
    """A 0-d tensor attribute is state the user may change: refused like any
    other (a Python number written into a tensor is a value: see
    tests/python/specs/real/window_mask.py)."""
    _export_error(tmp_path, _spec(init="self.scale = torch.tensor(2.0)",
                                  body="x = x * self.scale"),
                  "neither an input, a parameter nor a buffer", "shape [], float32",
                  at="x = x * self.scale")
