// Max-pooling internals shared by pool.cpp and its tests: the geometry and
// the two forward kernels (general, and the fast path for windows that tile
// the input), so tests can compare the paths on the same data.
#pragma once
#include <cstdint>

#include "ops/op.h"
#include "trainstep/tensor.h"

namespace ts {
namespace pool_detail {

struct PoolGeom {
  int64_t planes, H, W, OH, OW;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  Shape out_shape;
};

// Any geometry; y or idx may be nullptr (not written). T float or double.
template <class T>
void max_pool_general_t(const PoolGeom& g, const T* x, T* y, int64_t* idx);
void max_pool_general(const PoolGeom& g, const float* x, float* y, int64_t* idx);

// The first of a0, a0 + d, a0 + 2d, ... that is >= 0 (a window's first
// row or column inside the input).
int64_t first_in_bounds(int64_t a0, int64_t d);

// kernel == stride, no padding, no dilation, every window inside the input.
bool max_pool_tiles(const PoolGeom& g);
// Requires max_pool_tiles(g) and y (idx may be nullptr); same results as the
// general path.
void max_pool_tiled(const PoolGeom& g, const float* x, float* y, int64_t* idx);

// trainstep.max_pool2d_code's byte per window: bits 0-6 the argmax's offset
// in the window (row-major), kCodePass set unless the window's max is <= 0.
constexpr uint8_t kCodePass = 0x80;
// Requires max_pool_tiles(g): values and codes.
void max_pool_tiled_code(const PoolGeom& g, const float* x, float* y, uint8_t* code);

// The same for an input in a channel-blocked layout (N, C/block, H, W,
// block), block 8 or 16 (ops/layout.h); y and code stay plain.
void max_pool_blocked_code(const PoolGeom& g, int64_t block, const float* x, float* y,
                           uint8_t* code);
// Its backward: grad_output and code plain, grad_input blocked.
void max_pool_blocked_code_backward(const PoolGeom& g, int64_t block, const float* go,
                                    const uint8_t* code, float* gi);

// Any geometry (windows that overlap, padding, dilation, ceil_mode) with
// kh * kw <= 128, x and y each plain (block 1) or channel-blocked (8 or 16;
// then rank 4 with C channels): values, and codes in plain (N, C, OH, OW)
// order. A code's offset is the argmax's (row, column) in the unclipped
// window, found by the general path's rule over the window clipped to the
// input. Where x and y share a block, the lanes of a block run together.
void max_pool_code_any(const PoolGeom& g, int64_t C, int64_t x_block, int64_t y_block,
                       const float* x, float* y, uint8_t* code);
// Its backward: grad_input is 0 but at each window's argmax whose code
// passes, where grad_output adds up over the windows that share it. Returns
// how many passing codes named no element of the input (a program's bytes:
// those are skipped, and the caller fails).
int64_t max_pool_code_any_backward(const PoolGeom& g, int64_t C, int64_t go_block,
                                   int64_t gi_block, const float* go, const uint8_t* code,
                                   float* gi);

// The same over bfloat16 bits, x and y plain (block 1) or channels-last
// (block C). The backward needs windows that do not overlap: it copies each
// gradient to its argmax instead of adding.
bool windows_overlap(const PoolGeom& g);
void max_pool_code_any(const PoolGeom& g, int64_t C, int64_t x_block, int64_t y_block,
                       const uint16_t* x, uint16_t* y, uint8_t* code);
int64_t max_pool_code_any_backward(const PoolGeom& g, int64_t C, int64_t go_block,
                                   int64_t gi_block, const uint16_t* go, const uint8_t* code,
                                   uint16_t* gi);

}  // namespace pool_detail

using pool_detail::PoolGeom;
// Max pooling's geometry of input x from the node's attrs (kernel_size,
// stride, padding, dilation, ceil_mode), validated: every backend's.
PoolGeom max_pool_geom(const NodeCtx& ctx, const TensorType& x);

// The ops' names, spelled once: their registration and every backend's
// kernel table use these.
namespace opname {
inline constexpr const char* max_pool2d = "aten.max_pool2d_with_indices.default";
inline constexpr const char* max_pool2d_backward = "aten.max_pool2d_with_indices_backward.default";
}  // namespace opname

}  // namespace ts
