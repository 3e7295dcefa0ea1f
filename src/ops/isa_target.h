// Function attributes for the hand-written kernel paths of each ISA level
// (trainstep/cpu.h). A function marked TS_AVX2 or TS_AVX512 may use that
// level's intrinsics whatever the build's baseline architecture is; callers
// run it only when cpu_isa() says the level is on. Such a function cannot
// be inlined into an unmarked one, and a lambda inside it is unmarked, so
// helpers are marked functions, not lambdas.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#define TS_X86 1
#define TS_AVX2 __attribute__((target("avx2,fma")))
#if defined(__clang__)
#define TS_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
#define TS_AVX512_BF16 \
  __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#else
// GCC's generic tuning would vectorise such a function 256 bits wide.
#define TS_AVX512 \
  __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,prefer-vector-width=512")))
#define TS_AVX512_BF16                                                                    \
  __attribute__((target(                                                                  \
      "avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,prefer-vector-width=512")))
#endif
// TS_AVX512_BF16: AVX-512 with the bfloat16 dot product (vdpbf16ps: Zen 4,
// Cooper Lake, Sapphire Rapids), run only where cpu_isa() is Avx512 and
// the CPU has AVX512_BF16.
#else
#define TS_X86 0
#endif
// For loops written once and compiled into several of the functions above.
#define TS_INLINE inline __attribute__((always_inline))

namespace ts {
// GCC vector types of W floats (8: one AVX2 register, one channel block of
// nChw8c; 16: AVX-512, nChw16c). Arithmetic on them compiles to the vector
// width of the function it is inlined into, and a * b + c to an FMA.
template <int W>
struct VecOf;
template <>
struct VecOf<8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VecOf<16> {
  typedef float type __attribute__((vector_size(64)));
};
}  // namespace ts

#include "trainstep/cpu.h"
