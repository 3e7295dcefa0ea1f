"""nn.LSTM / nn.GRU / nn.RNN under the capture.

Two problems, two fixes:

* Stale weights. An RNN module passes its cached `_flat_weights` list to
  `_VF.lstm`; functional_call swaps the module's parameter attributes but not
  that list, so the traced step would read the original parameters as
  constants. `fresh_weights(model)` rebuilds the list from the (swapped)
  attributes for the duration of each forward.

* Inter-layer dropout. With `dropout > 0` in training, ATen draws the mask
  between layers itself (`bernoulli_`), outside trainstep's RNG. While the
  RNG stream is active (`rng.stream`: the traced step and the eager golden
  run alike) `_VF.lstm/gru/rnn_*` are wrapped: a multi-layer call runs as
  one real ATen call per layer with `rng.dropout` between them, which is
  what ATen computes, with the trainstep mask.
"""
import contextlib

import torch
import torch.nn as nn
import torch.nn.modules.rnn as rnn_mod


@contextlib.contextmanager
def fresh_weights(model):
    """Each RNN submodule reads its flat weights from its attributes."""
    mods = [m for m in model.modules() if isinstance(m, nn.RNNBase)]
    for m in mods:
        m.forward = _refreshing_forward(m)
    try:
        yield
    finally:
        for m in mods:
            del m.__dict__["forward"]


def _refreshing_forward(m):
    forward = type(m).forward

    def run(*args, **kwargs):
        cached = m._flat_weights
        m.__dict__["_flat_weights"] = [getattr(m, n) if hasattr(m, n) else None
                                       for n in m._flat_weights_names]
        try:
            return forward(m, *args, **kwargs)
        finally:
            m.__dict__["_flat_weights"] = cached
    return run


class _LayeredVF:
    """Stands in for torch._VF inside torch.nn.modules.rnn: everything is the
    real _VF except multi-layer lstm/gru/rnn_tanh/rnn_relu with dropout in
    training, which run layer by layer with trainstep's dropout between."""

    def __init__(self, vf, dropout):
        self._vf = vf
        self._dropout = dropout

    def __getattr__(self, name):
        fn = getattr(self._vf, name)
        if name not in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
            return fn
        return lambda *a: self._call(fn, name == "lstm", *a)

    def _call(self, fn, is_lstm, input, *rest):
        # Unpacked form: (input, hx, weights, has_biases, layers, dropout,
        # train, bidirectional, batch_first); the packed form is left to ATen.
        if len(rest) != 8 or not isinstance(rest[2], bool):
            return fn(input, *rest)
        hx, weights, bias, layers, p, train, bidir, batch_first = rest
        if not (train and p > 0 and layers > 1):
            return fn(input, *rest)
        per = len(weights) // layers
        dirs = 2 if bidir else 1
        hs, cs = [], []
        x = input
        for l in range(layers):
            w = weights[l * per:(l + 1) * per]
            if is_lstm:
                h0 = (hx[0][l * dirs:(l + 1) * dirs], hx[1][l * dirs:(l + 1) * dirs])
            else:
                h0 = hx[l * dirs:(l + 1) * dirs]
            out = fn(x, h0, w, bias, 1, 0.0, train, bidir, batch_first)
            x = out[0]
            hs.append(out[1])
            if is_lstm:
                cs.append(out[2])
            if l + 1 < layers:
                x = self._dropout(x, p, True)
        if is_lstm:
            return x, torch.cat(hs), torch.cat(cs)
        return x, torch.cat(hs)


@contextlib.contextmanager
def layered_dropout(dropout):
    """Routes RNN inter-layer dropout through `dropout(x, p, training)`."""
    saved = rnn_mod._VF
    rnn_mod._VF = _LayeredVF(saved, dropout)
    try:
        yield
    finally:
        rnn_mod._VF = saved
