// A grad_step in IR text for the data-parallel tests: a linear layer
// y = x w^T + b under a squared-error loss. w's gradient is 12 KiB, b's 256
// bytes, so a small first bucket splits them.
#pragma once

inline const char* const kLinearGradStep =
    "func grad_step(%w: float32[64, 48] {role=state, state=w}, %b: float32[64] {role=state, "
    "state=b}, %x: float32[32, 48] {role=input}, %t: float32[32, 64] {role=target}) {\n"
    "  %y0 = trainstep.matmul(%x, %w) {\"trans_a\":false,\"trans_b\":true}\n"
    "  %y = aten.add.Tensor(%y0, %b) {\"alpha\":1}\n"
    "  %d = aten.sub.Tensor(%y, %t) {\"alpha\":1}\n"
    "  %sq = aten.mul.Tensor(%d, %d)\n"
    "  %loss = aten.sum.default(%sq) {\"dtype\":null}\n"
    "  %g = aten.add.Tensor(%d, %d) {\"alpha\":1}\n"
    "  %gw = trainstep.matmul(%g, %x) {\"trans_a\":true,\"trans_b\":false}\n"
    "  %gb = aten.sum.dim_IntList(%g) {\"dim\":[0],\"dtype\":null,\"keepdim\":false}\n"
    "  return %loss {role=loss}, %gw {role=grad, state=w}, %gb {role=grad, state=b}\n}\n";
