// Device code of the Philox random ops, the same function as the CPU's
// (src/ops/random.cpp, src/ops/philox.h) bit for bit:
//   uniform: counter (lo32(b), hi32(b), key, offset) for block b = i / 4,
//            word i % 4, u = (x >> 8) * 2^-24;
//   normal:  counter (lo32(i), hi32(i), key, offset) per element, Box-Muller
//            of words 0 and 1 in double, rounded to float.
// The Philox key is (lo32(seed), hi32(seed)).
#include "cuda/philox_launch.h"
#include "ops/philox.h"

namespace ts::cuda {
namespace {

constexpr float kInv24f = 1.0f / 16777216.0f;  // 2^-24, exact
constexpr double kInv24 = 1.0 / 16777216.0;
constexpr double kPi = 3.14159265358979323846;  // M_PI

__global__ void philox_uniform_kernel(PhiloxParams p) {
  const uint64_t seed = static_cast<uint64_t>(*p.seed);
  const uint32_t offset = static_cast<uint32_t>(*p.offset);
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const int64_t blocks = (p.n + 3) / 4;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += step) {
    const uint64_t u = static_cast<uint64_t>(b);
    uint32_t x[4];
    const uint32_t ctr[4] = {static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32), p.key, offset};
    const uint32_t key[2] = {k0, k1};
    philox4x32_10(ctr, key, x);
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = static_cast<float>(x[j] >> 8) * kInv24f;
    float* o = p.out + b * 4;
    const int64_t m = p.n - b * 4 < 4 ? p.n - b * 4 : 4;
    if (m == 4 && (reinterpret_cast<uintptr_t>(o) & 15) == 0) {
      *reinterpret_cast<float4*>(o) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      for (int64_t j = 0; j < m; ++j) o[j] = v[j];
    }
  }
}

__global__ void philox_normal_kernel(PhiloxParams p) {
  const uint64_t seed = static_cast<uint64_t>(*p.seed);
  const uint32_t offset = static_cast<uint32_t>(*p.offset);
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n; i += step) {
    const uint64_t u = static_cast<uint64_t>(i);
    uint32_t x[4];
    const uint32_t ctr[4] = {static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32), p.key, offset};
    const uint32_t key[2] = {k0, k1};
    philox4x32_10(ctr, key, x);
    const double u1 = (static_cast<double>(x[0] >> 8) + 1.0) * kInv24;  // (0, 1]
    const double u2 = static_cast<double>(x[1] >> 8) * kInv24;          // [0, 1)
    p.out[i] = static_cast<float>(sqrt(-2.0 * log(u1)) * cos(2.0 * kPi * u2));
  }
}

constexpr unsigned kThreads = 256;

}  // namespace

void launch_philox(const PhiloxParams& p, cudaStream_t s) {
  if (p.normal)
    philox_normal_kernel<<<blocks_for(p.n, kThreads), kThreads, 0, s>>>(p);
  else
    philox_uniform_kernel<<<blocks_for((p.n + 3) / 4, kThreads), kThreads, 0, s>>>(p);
}

}  // namespace ts::cuda
