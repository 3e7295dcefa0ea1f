// Tensor creation: the ops' names, spelled once. Their registration (src/ops)
// and every backend's kernel table use these.
#pragma once

namespace ts::opname {

inline constexpr const char* full = "aten.full.default";
inline constexpr const char* zeros = "aten.zeros.default";
inline constexpr const char* arange = "aten.arange.default";
inline constexpr const char* arange_start_step = "aten.arange.start_step";

}  // namespace ts::opname
