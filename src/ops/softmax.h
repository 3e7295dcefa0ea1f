// Softmax and log_softmax (and their gradients) along attr dim: the lines
// they normalise, and the ops' names, spelled once. Their registration
// (src/ops) and every backend's kernel table use these.
#pragma once
#include <cstdint>

#include "ops/op.h"

namespace ts {

// The tensor as [O, R, I] lines of R elements along attr dim (wrapped);
// a 0-d tensor is one line of one element.
struct SoftmaxLines {
  int64_t O = 1, R = 1, I = 1;
  // dim is the tensor's last: torch runs its last-dim kernels, which round
  // differently in bfloat16 (I is 1 then, but also for trailing 1s).
  bool last = false;
};
SoftmaxLines softmax_lines(const NodeCtx& ctx, const Shape& s);

}  // namespace ts

namespace ts::opname {

inline constexpr const char* softmax = "aten._softmax.default";
inline constexpr const char* log_softmax = "aten._log_softmax.default";
inline constexpr const char* softmax_backward = "aten._softmax_backward_data.default";
inline constexpr const char* log_softmax_backward = "aten._log_softmax_backward_data.default";

}  // namespace ts::opname
