// bfloat16 <-> float32, as PyTorch converts: float32 -> bfloat16 rounds to
// nearest, ties to even, on every cast; bfloat16 -> float32 is exact.
#pragma once
#include <cstdint>
#include <cstring>

namespace ts {

// The bfloat16 bits of float bits u: round to nearest, ties to even. Every
// NaN becomes the quiet NaN 0x7FC0, as c10::BFloat16 makes it (torch's
// vectorised loops give 0xFFFF instead: both are NaN, the bits are not
// compared). The one rounding rule: every conversion below uses it.
inline uint16_t bf16_round_bits(uint32_t u) {
  const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0u : r);
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return bf16_round_bits(u);
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
// Each float replaced by its bfloat16 rounding, kept as a float (a fused
// kernel's tile holding a value eager holds in bfloat16).
void round_floats_to_bf16(float* p, int64_t n);

}  // namespace ts
