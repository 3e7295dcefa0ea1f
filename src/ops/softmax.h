// Softmax: the ops' names, spelled once. Their registration (src/ops)
// and every backend's kernel table use these.
#pragma once

namespace ts::opname {

inline constexpr const char* softmax = "aten._softmax.default";
inline constexpr const char* log_softmax = "aten._log_softmax.default";
inline constexpr const char* softmax_backward = "aten._softmax_backward_data.default";
inline constexpr const char* log_softmax_backward = "aten._log_softmax_backward_data.default";

}  // namespace ts::opname
