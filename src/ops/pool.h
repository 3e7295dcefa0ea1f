// Max-pooling internals shared by pool.cpp and its tests: the geometry and
// the two forward kernels (general, and the fast path for windows that tile
// the input), so tests can compare the paths on the same data.
#pragma once
#include <cstdint>

#include "trainstep/tensor.h"

namespace ts {
namespace pool_detail {

struct PoolGeom {
  int64_t planes, H, W, OH, OW;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  Shape out_shape;
};

// Any geometry; y or idx may be nullptr (not written).
void max_pool_general(const PoolGeom& g, const float* x, float* y, int64_t* idx);

// kernel == stride, no padding, no dilation, every window inside the input.
bool max_pool_tiles(const PoolGeom& g);
// Requires max_pool_tiles(g) and both outputs; same results as the general path.
void max_pool_tiled(const PoolGeom& g, const float* x, float* y, int64_t* idx);

}  // namespace pool_detail
}  // namespace ts
