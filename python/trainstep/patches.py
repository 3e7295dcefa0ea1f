"""Capture-time stand-ins for library code whose ATen form cannot be traced
into a static, functional graph. Each one computes what the original does
(the golden trace runs the originals in eager PyTorch, so `verify` checks
every stand-in against the real thing), using only static-shape ops.

- F.cross_entropy with label_smoothing > 0: torch 1.13 zeroes ignored
  targets with a boolean-mask index_put and averages with masked_select,
  whose output size depends on the data.
- F.cross_entropy and F.nll_loss with ignore_index < 0 (torch 1.13;
  minGPT's -1): 1.13's nll_loss decomposition and its vmap rule gather at
  the ignored index and fail; ignored targets read class 0 and are masked.
- F.batch_norm in training: eager updates the running stats in place
  inside native_batch_norm, whose 1.13 schema does not say so (functionalize
  cannot see the write).
- BatchNorm with momentum=None (cumulative average): the module reads
  num_batches_tracked as a Python float, which tracing would bake in as
  the first step's 1/1.
- nn.MultiheadAttention / nn.TransformerEncoderLayer in eval: their
  "fast path" is one fused op (_native_multi_head_attention,
  _transformer_encoder_layer_fwd) with no backward and no runtime kernel;
  fast_paths_off(model) makes them take the plain path, as in training.
- F.one_hot(y, num_classes): ATen checks the indices' range by reading
  their min and max; the stand-in compares with arange (DiceLoss-style
  losses call it).
- x[:, i, j] = v and x[i, :, j] = v (torch 1.13): make_fx(functionalize(grad))
  of a write through index tensors with full slices before or between them
  fails in 1.13 ("sym_strides() called on an undefined Tensor"); the slices
  become arange index tensors, which write the same elements (setitem).

F.scaled_dot_product_attention (2.x; nn.MultiheadAttention calls it too)
is traced as its math form too, but that patch is rng.stream's
(attention.patched): the eager golden run needs it for dropout as well.
"""
import contextlib

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from . import environment

_cross_entropy = F.cross_entropy
_batch_norm = F.batch_norm
_bn_forward = _BatchNorm.forward


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """F.cross_entropy; with label smoothing and class-index targets, the
    formula of torch 1.13's cross_entropy_loss_label_smoothing with the
    ignored targets masked by where() instead of boolean indexing."""
    if _gathers_at_ignored(target, ignore_index, size_average, reduce):
        return _ignored_masked(cross_entropy, input, target, weight, ignore_index, reduction,
                               label_smoothing=label_smoothing)
    if label_smoothing <= 0.0 or target.is_floating_point() \
            or size_average is not None or reduce is not None:
        return _cross_entropy(input, target, weight, size_average, ignore_index, reduce,
                              reduction, label_smoothing)
    class_dim = 0 if input.dim() == 1 else 1
    n_classes = input.shape[class_dim]
    logp = F.log_softmax(input, class_dim)
    nll = F.nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    keep = target != ignore_index
    if weight is not None:
        shape = [1] * input.dim()
        shape[class_dim] = n_classes
        smooth = -(logp * weight.view(shape)).sum(class_dim)
    else:
        smooth = -logp.sum(class_dim)
    smooth = torch.where(keep, smooth, torch.zeros_like(smooth))
    if reduction == "mean":
        if weight is not None:
            safe = torch.where(keep, target, torch.zeros_like(target)).flatten()
            w = weight.gather(0, safe) * keep.flatten()
            smooth = smooth.sum() / w.sum()
        else:
            smooth = smooth.sum() / keep.sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / n_classes)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """F.nll_loss (torch 1.13: see _gathers_at_ignored)."""
    if _gathers_at_ignored(target, ignore_index, size_average, reduce):
        return _ignored_masked(_nll_loss, input, target, weight, ignore_index, reduction)
    return _nll_loss(input, target, weight, size_average, ignore_index, reduce, reduction)


_nll_loss = F.nll_loss
_TORCH1 = torch.__version__.startswith("1.")


def _gathers_at_ignored(target, ignore_index, size_average, reduce):
    """Whether torch 1.13 would gather at the ignored index: its
    nll_loss decomposition and its vmap rule (the per-sample eval loss) mask
    only an ignore_index >= 0, so minGPT's ignore_index=-1 fails to trace."""
    return _TORCH1 and ignore_index < 0 and not target.is_floating_point() \
        and size_average is None and reduce is None


def _ignored_masked(loss, input, target, weight, ignore_index, reduction, **kw):
    """loss(...) with the ignored targets read at class 0 and masked out, and
    the mean over the kept targets' weights, as torch reduces."""
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    # No target is the class count: nothing more is ignored.
    n_classes = input.shape[1 if input.dim() > 1 else 0]
    each = loss(input, safe, weight, ignore_index=n_classes, reduction="none", **kw)
    each = torch.where(keep, each, torch.zeros_like(each))
    if reduction == "none":
        return each
    if reduction == "sum":
        return each.sum()
    if weight is None:
        return each.sum() / keep.sum()
    return each.sum() / (weight.gather(0, safe.flatten()) * keep.flatten()).sum()


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """F.batch_norm. In training with running stats, eager's native_batch_norm
    updates them in place, which a functional graph cannot say: here the op
    gets no running stats and the update is computed from its saved batch
    mean and 1/sqrt(var + eps), in float64 as eager does:
    r = m * batch + (1 - m) * r, with the unbiased batch variance.
    `momentum` may be a 0-d float64 tensor (the cumulative average)."""
    if not training or (running_mean is None and running_var is None):
        return _batch_norm(input, running_mean, running_var, weight, bias, training,
                           momentum, eps)
    F._verify_batch_size(input.size())
    out, mean, invstd = torch.native_batch_norm(input, weight, bias, None, None, True, 0.0, eps)
    n = input.numel() // input.shape[1]
    var = (invstd.detach().to(torch.float64).pow(-2) - eps) * (n / (n - 1))
    for run, batch in ((running_mean, mean.detach().to(torch.float64)), (running_var, var)):
        if run is not None:
            new = momentum * batch + (1 - momentum) * run.to(torch.float64)
            run.copy_(new.to(run.dtype))
    return out


def batch_norm_forward(self, input):
    """_BatchNorm.forward; with momentum=None in training, the cumulative
    average's factor 1/num_batches_tracked is a tensor, not a Python float."""
    if not (self.momentum is None and self.training and self.track_running_stats
            and self.num_batches_tracked is not None):
        return _bn_forward(self, input)
    self._check_input_dim(input)
    self.num_batches_tracked.add_(1)
    factor = 1.0 / self.num_batches_tracked.to(torch.float64)
    return batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                      True, factor, self.eps)


def _mask_as_given(mask, is_causal=None, size=None):
    """2.x's nn.TransformerEncoder/Decoder ask whether a mask is causal by
    comparing it with one (a tensor value read into Python, which the graph
    would freeze); the hint only picks kernels, so the capture applies the
    mask as given."""
    return is_causal is True


_setitem = torch.Tensor.__setitem__


def _full(t):
    """t is `:` in an index key."""
    return isinstance(t, slice) and t == slice(None)


def _sliced_index(self, key):
    """key with its full slices before the last index tensor as broadcast
    aranges, when key is full slices and integer index tensors; else None.
    torch puts the index tensors' broadcast dims where they are when they
    are adjacent (x[:, i, j]), and first when a slice separates them
    (x[i, :, j]): the aranges' dims go after or before them to match."""
    if not isinstance(key, tuple):
        return None
    full = [_full(t) for t in key]
    ints = [isinstance(t, torch.Tensor) and not t.is_floating_point()
            and t.dtype not in (torch.bool, torch.uint8) for t in key]
    if not any(ints) or not all(f or i for f, i in zip(full, ints)):
        return None
    first, last = ints.index(True), len(ints) - 1 - ints[::-1].index(True)
    slices = [d for d in range(last + 1) if full[d]]  # trailing ones stay slices
    if not slices:
        return None
    m = len(torch.broadcast_shapes(*[t.shape for t in key if isinstance(t, torch.Tensor)]))
    apart = any(full[first:last])
    if apart and any(t.dim() == 0 for t in key if isinstance(t, torch.Tensor)):
        return None  # torch takes a 0-d index as an int: which dims go first differs
    new = []
    for d, t in enumerate(key[:last + 1]):
        if full[d]:
            after = len(slices) - 1 - slices.index(d) + (0 if apart else m)
            new.append(torch.arange(self.shape[d], device=self.device)
                       .reshape([self.shape[d]] + [1] * after))
        else:  # apart: the index dims come first, then the slices'
            new.append(t.reshape(*t.shape, *[1] * len(slices)) if apart else t)
    return tuple(new)


def _sliced_mask(self, key, value):
    """x[:, mask] = v (one or more full slices, then one bool mask over the
    next dims, v broadcasting over the dims after them) as the mask
    reshaped to x's rank; else None (a plain x[mask] = v is
    decompositions.py's, v sized by the mask's count is data-dependent)."""
    if not isinstance(key, tuple) or not key or not _full(key[0]):
        return None
    at = [i for i, t in enumerate(key)
          if isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8)]
    if len(at) != 1 or any(not _full(t) for i, t in enumerate(key) if i != at[0]):
        return None
    first, mask = at[0], key[at[0]].bool()
    rest = self.dim() - first - mask.dim()
    if rest < 0 or tuple(self.shape[first:first + mask.dim()]) != tuple(mask.shape):
        return None
    v = torch.as_tensor(value)
    if v.numel() != 1 and (v.dim() > rest or any(
            a not in (1, b) for a, b in zip(v.shape[::-1], self.shape[::-1]))):
        return None
    return mask.reshape([1] * first + list(mask.shape) + [1] * rest)


def setitem(self, key, value):
    """Tensor.__setitem__, with x[:, i, j] = v as x[arange, i, j] = v,
    x[i, :, j] = v as x[i, arange, j] = v, and x[:, mask] = v as a where()
    written back (1.13 cannot trace a mask after a slice)."""
    mask = _sliced_mask(self, key, value)
    if mask is not None:
        v = torch.as_tensor(value, dtype=self.dtype, device=self.device)
        self.copy_(torch.where(mask, v.reshape(()) if v.numel() == 1 else v, self))
        return None
    new = _sliced_index(self, key)
    return _setitem(self, key if new is None else new, value)


# provenance.py and capture_errors.py take a node's source line from the
# innermost user frame, stopping at trainstep's own: this wrapper stands in
# for the user's `x[key] = v`, so it goes by a generated-code name, which
# both step over to the user's line.
setitem.__code__ = setitem.__code__.replace(co_filename="<trainstep.patches.setitem>")


def one_hot(tensor, num_classes=-1):
    """F.one_hot with num_classes given, as a comparison with arange: ATen's
    reads the indices' min and max to check them (a value read in a
    traced step). Without num_classes the width is the data's max + 1, a
    data-dependent shape: that call goes to the original, which refuses."""
    if num_classes < 0:
        return _one_hot(tensor, num_classes)
    classes = torch.arange(num_classes, dtype=tensor.dtype, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).to(torch.int64)


_one_hot = F.one_hot


def stand_ins(p):
    """Adds every stand-in above to `p` (environment.Patches)."""
    import torch.nn.modules.transformer as T
    p.add(F, "cross_entropy", cross_entropy).add(F, "batch_norm", batch_norm)
    if _TORCH1:
        p.add(F, "nll_loss", nll_loss)
    p.add(_BatchNorm, "forward", batch_norm_forward).add(F, "one_hot", one_hot)
    if hasattr(T, "_detect_is_causal_mask"):  # torch >= 2.1
        p.add(T, "_detect_is_causal_mask", _mask_as_given)
    if not hasattr(torch, "compile"):  # 2.x traces the sliced form
        p.add(torch.Tensor, "__setitem__", setitem)
    return p


def applied():
    """The stand-ins, on their own (trace.py applies them with the rest of
    the tracing environment)."""
    return stand_ins(environment.Patches()).applied()


@contextlib.contextmanager
def fast_paths_off(model):
    """The modules' plain (training) code path in eval too. torch >= 2.2 has
    a switch; on older torch, each module's fast-path check reads an
    attribute that nothing else does: TransformerEncoderLayer's
    activation_relu_or_gelu, and MultiheadAttention's dropout, which the
    plain path ignores in eval (F.multi_head_attention_forward drops
    dropout_p when not training)."""
    mha = getattr(torch.backends, "mha", None)
    if mha is not None and hasattr(mha, "set_fastpath_enabled"):
        was = mha.get_fastpath_enabled()
        mha.set_fastpath_enabled(False)
        try:
            yield
        finally:
            mha.set_fastpath_enabled(was)
        return
    saved = []
    for m in model.modules():
        if isinstance(m, torch.nn.TransformerEncoderLayer) and hasattr(m, "activation_relu_or_gelu"):
            saved.append((m, "activation_relu_or_gelu", m.activation_relu_or_gelu))
            m.activation_relu_or_gelu = False
        elif isinstance(m, torch.nn.MultiheadAttention) and not m.training and not m.dropout:
            saved.append((m, "dropout", m.dropout))
            m.dropout = 1e-30
    try:
        yield
    finally:
        for m, attr, v in saved:
            setattr(m, attr, v)
