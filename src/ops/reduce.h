// The reductions' plans, computed once here for every backend: which dims a
// node reduces, and the input's dims merged to [O, R, I] or, with several
// reduced groups, to kept and reduced dims with their strides.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/broadcast.h"
#include "ops/op.h"

namespace ts {

struct ReducePlan {
  bool general = false;
  int64_t O = 1, R = 1, I = 1;  // [O, R, I] form; R == 0 for an empty input
  int64_t out_numel = 1;
  // general form: kept and reduced dims of the merged input, with strides
  int nk = 0, nr = 0;
  int64_t kshape[kMaxDims], kstride[kMaxDims], rshape[kMaxDims], rstride[kMaxDims];
};

// Reduced dims of `in` from attr `dim` (absent, null or empty: all).
std::vector<bool> reduced_dims(const NodeCtx& ctx, const Shape& in);
// Drops size-1 dims and merges neighbours that are both kept or both reduced.
ReducePlan reduce_plan(const NodeCtx& ctx, const Shape& in, const std::vector<bool>& red);

// argmax: [O, R, I] around attr dim (absent: R is every element).
struct ArgmaxPlan {
  int64_t O = 1, R = 1, I = 1;
};
ArgmaxPlan argmax_plan(const NodeCtx& ctx, const Shape& in);

// The ops' names, spelled once: their registration and every backend's
// kernel table use these.
namespace opname {
inline constexpr const char* sum_dim = "aten.sum.dim_IntList";
inline constexpr const char* sum = "aten.sum.default";
inline constexpr const char* mean_dim = "aten.mean.dim";
inline constexpr const char* mean = "aten.mean.default";
inline constexpr const char* amax = "aten.amax.default";
inline constexpr const char* amin = "aten.amin.default";
inline constexpr const char* argmax = "aten.argmax.default";
}  // namespace opname

}  // namespace ts
