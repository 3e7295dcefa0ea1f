#include "trainstep/bfloat16.h"

namespace ts {

// Branch-free forms of the inline conversions, which GCC vectorises at -O2
// and above for whatever ISA the file is built for.
void floats_to_bf16(const float* __restrict src, uint16_t* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    dst[i] = static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0u : r);
  }
}

void bf16_to_floats(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

}  // namespace ts
