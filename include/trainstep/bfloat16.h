// bfloat16 <-> float32, as PyTorch converts: float32 -> bfloat16 rounds to
// nearest, ties to even, on every cast; bfloat16 -> float32 is exact.
#pragma once
#include <cstdint>
#include <cstring>

namespace ts {

// Every NaN becomes the quiet NaN 0x7FC0, as c10::BFloat16 makes it (torch's
// vectorised loops give 0xFFFF instead: both are NaN, the bits are not
// compared).
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// n elements; loops the compiler vectorises (no aliasing between src and dst).
void floats_to_bf16(const float* src, uint16_t* dst, int64_t n);
void bf16_to_floats(const uint16_t* src, float* dst, int64_t n);

}  // namespace ts
