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

}  // namespace ts
