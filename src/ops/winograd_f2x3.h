// The arithmetic of Winograd F(2x2, 3x3), shared by the float32 kernels
// (conv_winograd.h, channel-blocked) and the bfloat16 ones
// (conv_winograd_bf16.h, channels-last): the four transforms, where tiles
// sit, and how blocks of tiles are split between threads. Lanes are
// channels throughout, so each transform is vector arithmetic on whole
// channel vectors; V is a GCC vector type (VecOf), or float for the
// per-weight transforms.
//
// Helpers take arrays (pointers), not vectors by value: they are unmarked
// templates inlined into ISA-marked functions (isa_target.h).
#pragma once
#include <cstdint>

#include "ops/isa_target.h"
#include "ops/parallel.h"

namespace ts {
namespace winograd {

// Tile t of N images with th x tw tiles each: its image and its first
// output row and column.
struct TilePos {
  int64_t n, oh0, ow0;
};
inline TilePos tile_pos(int64_t th, int64_t tw, int64_t t) {
  const int64_t per_image = th * tw;
  return {t / per_image, 2 * (t % per_image / tw), 2 * (t % tw)};
}

// f = B^T d B of a 4x4 input window d, as 16 values row by row.
template <class V>
TS_INLINE void input_transform(const V d[4][4], V f[16]) {
  V e[4][4];  // B^T d: rows
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    e[0][c] = d[0][c] - d[2][c];
    e[1][c] = d[1][c] + d[2][c];
    e[2][c] = d[2][c] - d[1][c];
    e[3][c] = d[1][c] - d[3][c];
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {  // (B^T d) B: columns
    f[4 * r + 0] = e[r][0] - e[r][2];
    f[4 * r + 1] = e[r][1] + e[r][2];
    f[4 * r + 2] = e[r][2] - e[r][1];
    f[4 * r + 3] = e[r][1] - e[r][3];
  }
}

// The 2x2 outputs y = A^T s A of 16 products s (row by row).
template <class V>
TS_INLINE void output_transform(const V s[16], V y[2][2]) {
  V r2[2][4];  // A^T s: rows
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    r2[0][c] = s[c] + s[4 + c] + s[8 + c];
    r2[1][c] = s[4 + c] - s[8 + c] - s[12 + c];
  }
  for (int r = 0; r < 2; ++r) {
    y[r][0] = r2[r][0] + r2[r][1] + r2[r][2];
    y[r][1] = r2[r][1] - r2[r][2] - r2[r][3];
  }
}

// f = A dy A^T of a tile's 2x2 grad_output (the output transform's
// adjoint, for the weight gradient), as 16 values; A's rows (1, 0),
// (1, 1), (1, -1), (0, -1).
template <class V>
TS_INLINE void grad_transform(const V y[2][2], V f[16]) {
  V e[4][2];
  for (int c = 0; c < 2; ++c) {
    e[0][c] = y[0][c];
    e[1][c] = y[0][c] + y[1][c];
    e[2][c] = y[0][c] - y[1][c];
    e[3][c] = -y[1][c];
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    f[4 * r + 0] = e[r][0];
    f[4 * r + 1] = e[r][0] + e[r][1];
    f[4 * r + 2] = e[r][0] - e[r][1];
    f[4 * r + 3] = -e[r][1];
  }
}

// u = G g G^T of a 3x3 kernel, as 16 values; G's rows (1, 0, 0),
// (1/2, 1/2, 1/2), (1/2, -1/2, 1/2), (0, 0, 1).
inline void weight_transform(const float g[3][3], float u[16]) {
  float gg[4][3];  // G g
  for (int c = 0; c < 3; ++c) {
    gg[0][c] = g[0][c];
    gg[1][c] = 0.5f * (g[0][c] + g[1][c] + g[2][c]);
    gg[2][c] = 0.5f * (g[0][c] - g[1][c] + g[2][c]);
    gg[3][c] = g[2][c];
  }
  for (int r = 0; r < 4; ++r) {
    u[4 * r + 0] = gg[r][0];
    u[4 * r + 1] = 0.5f * (gg[r][0] + gg[r][1] + gg[r][2]);
    u[4 * r + 2] = 0.5f * (gg[r][0] - gg[r][1] + gg[r][2]);
    u[4 * r + 3] = gg[r][2];
  }
}

// The 3x3 weight gradient G^T d G of 16 sums d (the weight transform's
// adjoint); G^T's rows (1, 1/2, 1/2, 0), (0, 1/2, -1/2, 0), (0, 1/2, 1/2, 1).
inline void weight_grad_transform(const float d[16], float gw[9]) {
  float e[3][4];  // G^T d
  for (int c = 0; c < 4; ++c) {
    e[0][c] = d[c] + 0.5f * (d[4 + c] + d[8 + c]);
    e[1][c] = 0.5f * (d[4 + c] - d[8 + c]);
    e[2][c] = 0.5f * (d[4 + c] + d[8 + c]) + d[12 + c];
  }
  for (int r = 0; r < 3; ++r) {
    gw[r * 3 + 0] = e[r][0] + 0.5f * (e[r][1] + e[r][2]);
    gw[r * 3 + 1] = 0.5f * (e[r][1] - e[r][2]);
    gw[r * 3 + 2] = 0.5f * (e[r][1] + e[r][2]) + e[r][3];
  }
}

// Runs block(first tile, this thread's scratch) for every block of `T`
// tiles out of `tiles`, the blocks split in order between up to `threads`
// threads (one unless `parallel`), each thread calling start(its scratch)
// first; thread t's scratch is scratch + t * per_thread. Returns how many
// threads ran.
template <class Byte, class F, class S>
int for_tile_blocks(int64_t tiles, int64_t T, bool parallel, int threads, Byte* scratch,
                    int64_t per_thread, F&& block, S&& start) {
  const int64_t blocks = (tiles + T - 1) / T;
  int used = 1;
  parallel_region(parallel, [&](int t, int nt) {
    if (t == 0) used = nt;
    int64_t b, e;
    split_range(blocks, t, nt, b, e);
    Byte* s = scratch + t * per_thread;
    start(s);
    for (int64_t k = b; k < e; ++k) block(k * T, s);
  }, threads);
  return used;
}

}  // namespace winograd
}  // namespace ts
