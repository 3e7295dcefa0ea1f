// bfloat16 loads and rounding stores on W float lanes (GCC vector
// extensions), for kernels that convert inside their own loops instead of
// through a float buffer. GCC leaves the scalar rounding rule unvectorised,
// so it is spelled out here on lanes; the bits are bf16_round_bits'. The
// lanes compile to the vector width of the function they are inlined into.
#pragma once
#include <cstdint>
#include <cstring>

#include "ops/isa_target.h"

namespace ts {

template <int W>
struct BfLanes {
  typedef float f __attribute__((vector_size(W * 4)));
  typedef uint32_t u __attribute__((vector_size(W * 4)));
  typedef int32_t i __attribute__((vector_size(W * 4)));
  typedef uint16_t h __attribute__((vector_size(W * 2)));
};

// Vectors by reference: these are unmarked templates inlined into marked
// functions, and a 64-byte vector by value would change the unmarked ABI.
template <int W>
TS_INLINE void store_bf16(uint16_t* y, const typename BfLanes<W>::f& v) {
  using L = BfLanes<W>;
  typename L::u u;
  std::memcpy(&u, &v, sizeof u);
  const typename L::u r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const typename L::u nan = (typename L::u)((typename L::i)(u & 0x7FFFFFFFu) > 0x7F800000);
  const typename L::h b = __builtin_convertvector((r & ~nan) | (nan & 0x7FC0u), typename L::h);
  std::memcpy(y, &b, sizeof b);
}

template <int W>
TS_INLINE void load_bf16(const uint16_t* x, typename BfLanes<W>::f& v) {
  using L = BfLanes<W>;
  typename L::h b;
  std::memcpy(&b, x, sizeof b);
  const typename L::u u = __builtin_convertvector(b, typename L::u) << 16;
  std::memcpy(&v, &u, sizeof v);
}

}  // namespace ts
