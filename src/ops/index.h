// Gather, scatter and indexing: the ops' names, spelled once. Their registration (src/ops)
// and every backend's kernel table use these.
#pragma once

namespace ts::opname {

inline constexpr const char* gather = "aten.gather.default";
inline constexpr const char* scatter_value = "aten.scatter.value";
inline constexpr const char* scatter_src = "aten.scatter.src";
inline constexpr const char* scatter_add = "aten.scatter_add.default";
inline constexpr const char* index_select = "aten.index_select.default";
inline constexpr const char* index_put = "aten.index_put.default";

}  // namespace ts::opname
