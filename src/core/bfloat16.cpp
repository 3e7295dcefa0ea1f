#include "trainstep/bfloat16.h"

namespace ts {

// Loops over the inline rule, branch-free, which GCC vectorises at -O2 and
// above for whatever ISA the file is built for.
void floats_to_bf16(const float* __restrict src, uint16_t* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    dst[i] = bf16_round_bits(u);
  }
}

void round_floats_to_bf16(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, p + i, 4);
    u = static_cast<uint32_t>(bf16_round_bits(u)) << 16;
    std::memcpy(p + i, &u, 4);
  }
}

void bf16_to_floats(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

}  // namespace ts
