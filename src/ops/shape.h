// The copying shape ops' arguments, validated from a node: every backend's.
// (Permute, expand, as_strided and clone give their views through
// OpDef::strided_view.)
#pragma once
#include <cstdint>
#include <utility>

#include "ops/op.h"

namespace ts {

// slice / slice_scatter along dim: elements start, start + step, ... (len of
// them), start and end clamped to the dim as Python slices are.
struct SliceArgs {
  int64_t dim, start, step, len;
};
SliceArgs slice_args(const NodeCtx& ctx);

// select: (dim, index), both wrapped and in range.
std::pair<int64_t, int64_t> select_args(const NodeCtx& ctx);

// The ops' names, spelled once: their registration and every backend's
// kernel table use these.
namespace opname {
inline constexpr const char* cat = "aten.cat.default";
inline constexpr const char* stack = "aten.stack.default";
inline constexpr const char* slice = "aten.slice.Tensor";
inline constexpr const char* select = "aten.select.int";
inline constexpr const char* slice_scatter = "aten.slice_scatter.default";
inline constexpr const char* unbind = "aten.unbind.int";
inline constexpr const char* unsafe_split = "aten.unsafe_split.Tensor";
inline constexpr const char* split_with_sizes = "aten.split_with_sizes.default";
inline constexpr const char* t = "aten.t.default";
inline constexpr const char* as_strided = "aten.as_strided.default";
inline constexpr const char* view = "aten.view.default";
}  // namespace opname

}  // namespace ts
