// Average and adaptive pooling geometry, validated from a node's attrs and
// input: the CPU kernels (avg_pool.cpp) and every other backend read these.
#pragma once
#include <cstdint>

#include "ops/op.h"

namespace ts {

// The (N, C, H, W) / (C, H, W) input every op here takes.
struct PoolPlanes {
  DType dtype = DType::F32;
  int64_t planes = 1, H = 0, W = 0;
};

struct AvgGeom {
  PoolPlanes p;
  int64_t OH = 0, OW = 0, kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0;
  bool include_pad = true;
  int64_t divisor = 0;  // divisor_override; 0: none
  Shape in_shape, out_shape;
};

// avg_pool2d of x: kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override.
AvgGeom avg_pool_geom(const NodeCtx& ctx, const TensorType& x);

struct AdaGeom {
  PoolPlanes p;
  int64_t OH = 0, OW = 0;
  Shape in_shape, out_shape;
};

// Adaptive pooling of x to out_hw's last two dims, or (null) to attr
// output_size.
AdaGeom adaptive_pool_geom(const NodeCtx& ctx, const TensorType& x, const Shape* out_hw);
// The backward ops' (inputs grad_output, self): checks grad_output too.
AdaGeom adaptive_pool_bwd_geom(const NodeCtx& ctx);

// The ops' names, spelled once: their registration and every backend's
// kernel table use these.
namespace opname {
inline constexpr const char* avg_pool2d = "aten.avg_pool2d.default";
inline constexpr const char* avg_pool2d_backward = "aten.avg_pool2d_backward.default";
inline constexpr const char* adaptive_avg_pool2d = "aten._adaptive_avg_pool2d.default";
inline constexpr const char* adaptive_avg_pool2d_backward = "aten._adaptive_avg_pool2d_backward.default";
inline constexpr const char* adaptive_max_pool2d = "aten.adaptive_max_pool2d.default";
inline constexpr const char* adaptive_max_pool2d_backward = "aten.adaptive_max_pool2d_backward.default";
}  // namespace opname

}  // namespace ts
