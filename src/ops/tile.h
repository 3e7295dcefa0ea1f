// Float32 tile forms (TileOp) of pointwise ops, for the fused elementwise
// kernel. Each op builds its tile from the same functor its kernel loops
// use, so a fused group computes what the unfused ops compute. Tensor
// operands arrive as n floats (bool as 0.0f / 1.0f; one-element operands
// already broadcast over the tile).
#pragma once
#include <memory>
#include <vector>

#include "ops/isa_target.h"
#include "ops/op.h"

namespace ts {

// Tile forms need every tensor operand in float32 or bool, or one element
// (which the fused kernel casts to float32, as the kernels' CastSlot does).
inline bool tile_operands_ok(const NodeCtx& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return false;
    const TensorType& t = ctx.input(i);
    if (t.dtype != DType::F32 && t.dtype != DType::Bool && t.numel() != 1) return false;
  }
  return true;
}

inline float as_float01(bool b) { return b ? 1.0f : 0.0f; }

// A tile form whose loop (D::loop, always inlined) the compiler vectorises
// once for the build's baseline and again for AVX-512 (and for AVX2 when the
// baseline lacks it); run picks one by cpu_isa() on each call. The loops
// are plain C++, so every version computes the same values.
template <class D>
struct IsaTile : TileOp {
  void run(const float* const* in, float* out, int64_t n) const override {
#if TS_X86
    if (cpu_isa() == CpuIsa::Avx512) return run_avx512(in, out, n);
#if !defined(__AVX2__)
    if (cpu_isa() == CpuIsa::Avx2) return run_avx2(in, out, n);
#endif
#endif
    static_cast<const D*>(this)->loop(in, out, n);
  }
#if TS_X86
  TS_AVX512 void run_avx512(const float* const* in, float* out, int64_t n) const {
    static_cast<const D*>(this)->loop(in, out, n);
  }
#if !defined(__AVX2__)
  TS_AVX2 void run_avx2(const float* const* in, float* out, int64_t n) const {
    static_cast<const D*>(this)->loop(in, out, n);
  }
#endif
#endif
};

// out[i] = f(in0[i])
template <class F>
struct UnaryTile : IsaTile<UnaryTile<F>> {
  F f;
  explicit UnaryTile(F fn) : f(fn) {}
  TS_INLINE void loop(const float* const* in, float* out, int64_t n) const {
    const float* a = in[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i]);
  }
};

// out[i] = f(in0[i], in1[i]); Bool: f returns bool, stored as 0/1.
template <class F, bool Bool = false>
struct BinaryTile : IsaTile<BinaryTile<F, Bool>> {
  F f;
  explicit BinaryTile(F fn) : f(fn) {}
  TS_INLINE void loop(const float* const* in, float* out, int64_t n) const {
    const float* a = in[0];
    const float* b = in[1];
    if constexpr (Bool) {
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]) ? 1.0f : 0.0f;
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
    }
  }
};

// out[i] = f(in0[i], b) with b a constant (a Scalar op's attribute).
template <class F, bool Bool = false>
struct BinaryConstTile : IsaTile<BinaryConstTile<F, Bool>> {
  F f;
  float b;
  BinaryConstTile(F fn, float v) : f(fn), b(v) {}
  TS_INLINE void loop(const float* const* in, float* out, int64_t n) const {
    const float* a = in[0];
    const float bv = b;
    if constexpr (Bool) {
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], bv) ? 1.0f : 0.0f;
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], bv);
    }
  }
};

}  // namespace ts
