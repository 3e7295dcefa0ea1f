// Shared helpers for the elementwise, reduce, index, shape and creation ops:
// PyTorch dtype promotion, broadcast shape inference, a broadcast iteration
// plan built once in make(), dtype dispatch and dtype casts.
#pragma once
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/op.h"
#include "ops/parallel.h"
#include "trainstep/bfloat16.h"

namespace ts {

// Below this many elements a kernel runs on one thread (fork/join costs more).
constexpr int64_t kParallelMin = 32768;
// Broadcast plans use fixed arrays so that run() never allocates.
constexpr int kMaxDims = 16;

// ---- dtype promotion (mirrors c10::promoteTypes / at::result_type) ----
DType promote_types(DType a, DType b);
// result_type over operands: category bool < int < float; dimensioned tensors
// decide over 0-d tensors, which decide over wrapped scalars.
DType result_type(const std::vector<TensorType>& ops);
// The type of a scalar attribute used as an operand (a wrapped number):
// bool -> bool, int -> int64, float/"inf"/"nan" -> float64, all 0-d wrapped.
TensorType scalar_attr_type(const NodeCtx& ctx, const std::string& key);
// Storage type a kernel computes in: float/double/bool as is, ints as int64.
DType compute_dtype(DType t);

// ---- shapes ----
Shape broadcast_shapes(const NodeCtx& ctx, const std::vector<Shape>& shapes);
// Wraps a possibly negative dim into [0, rank); rank 0 accepts -1 and 0.
int64_t wrap_dim(const NodeCtx& ctx, int64_t d, int64_t rank);
std::vector<int64_t> contiguous_strides(const Shape& s);
inline int64_t rank_of(const TensorType& t) { return static_cast<int64_t>(t.shape.size()); }

// ---- dispatch ----
// f(an unsigned integer of es bytes): for kernels that only move elements,
// one instantiation per element size covers every dtype.
template <class F>
void by_size(size_t es, F&& f) {
  switch (es) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

template <class F>
auto dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
    case DType::I64: return f(int64_t{});
    case DType::I32: return f(int32_t{});
    case DType::U8: return f(uint8_t{});
    case DType::Bool: break;
    case DType::BF16:
      // Kernels compute bfloat16 in float32 (compute_dtype); an op reaches
      // here only if its OpDef claims bfloat16 without converting.
      fail("internal: a bfloat16 tensor reached a kernel loop with no bfloat16 form");
  }
  return f(bool{});
}

// ---- integer arithmetic and float -> integer conversion, defined ----
// C++ leaves signed overflow and out-of-range float conversions undefined;
// data from a hostile program (or a diverging step) reaches both. Integers
// wrap around (two's complement) as in PyTorch's CPU kernels, through the
// unsigned type; floats and bool get the plain operation.
template <class T>
constexpr bool kWrapsThroughUnsigned = std::is_integral_v<T> && std::is_signed_v<T>;
template <class T>
T wrap_add(T a, T b) {
  if constexpr (kWrapsThroughUnsigned<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return static_cast<T>(a + b);
  }
}
template <class T>
T wrap_sub(T a, T b) {
  if constexpr (kWrapsThroughUnsigned<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return static_cast<T>(a - b);
  }
}
template <class T>
T wrap_mul(T a, T b) {
  if constexpr (kWrapsThroughUnsigned<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return static_cast<T>(a * b);
  }
}
template <class T>
T wrap_neg(T a) {
  if constexpr (kWrapsThroughUnsigned<T>) return wrap_sub(T(0), a);
  else return static_cast<T>(-a);  // not 0 - a: -0.0 stays
}
// A float as integer type D: truncated toward zero; NaN and values out of
// range give the minimum, as x86's conversion does (and so PyTorch's CPU
// kernels); uint8 takes the low byte of the int32 conversion, as x86 code
// does for a float -> uint8 cast.
template <class D, class S>
D float_to_int(S x) {
  using I = std::conditional_t<std::is_signed_v<D>, D, int32_t>;
  constexpr S lo = static_cast<S>(std::numeric_limits<I>::min());  // -2^k, exact
  const I i = x >= lo && x < -lo ? static_cast<I>(x) : std::numeric_limits<I>::min();
  return static_cast<D>(i);
}
// static_cast with float -> integer conversions made total (float_to_int).
template <class D, class S>
D convert(S x) {
  if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D> && !std::is_same_v<D, bool>)
    return float_to_int<D>(x);
  else
    return static_cast<D>(x);
}

// x as torch casts a double to bfloat16: to float32, then to nearest even.
uint16_t double_to_bf16(double x);
// Converts n elements; src may equal a different dtype only (no aliasing).
// Every cast to bfloat16 goes through float32, as torch's does.
void cast_buffer(const void* src, DType sd, void* dst, DType dd, int64_t n);
// Reads/writes one element as double (for scalars; exact for |int| < 2^53).
double read_as_double(const void* p, DType t);
int64_t read_as_int(const void* p, DType t);
// Stores a scalar given as double / int64 in dtype t (ints from `i` exactly).
void store_scalar(void* dst, DType t, double d, int64_t i);
// A float attribute as an int64 for an integer kernel: truncated, or 0 when
// out of int64's range or NaN (where the C++ conversion is undefined).
inline int64_t int_of_float(double d) {
  return d > -0x1p63 && d < 0x1p63 ? static_cast<int64_t>(d) : 0;
}

// Fills n elements of dst with one element value (any dtype, by size).
void fill_bytes(void* dst, const void* elem, size_t esize, int64_t n);

// ---- broadcast iteration ----
// Operands are laid against the output shape with stride 0 on broadcast dims;
// adjacent dims that stay contiguous for every operand are merged, so the
// innermost stride of each operand is 0 or 1.
struct BcastPlan {
  int nops = 0;
  int rank = 0;  // after merging
  int64_t numel = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[4][kMaxDims] = {};
  bool flat[4] = {};    // same numel as the output: plain contiguous index
  bool scalar[4] = {};  // one element
};
BcastPlan make_bcast_plan(const NodeCtx& ctx, const Shape& out, const std::vector<Shape>& ins);

// Calls f(out_off, offs, n, inner) for each innermost row of the output, in
// parallel for large outputs; offs[k] is operand k's offset and inner[k] its
// innermost stride (0 or 1).
template <class F>
void bcast_for_rows(const BcastPlan& p, F&& f) {
  const int r = p.rank;
  const int64_t inner = r ? p.shape[r - 1] : 1;
  const int64_t rows = inner ? p.numel / inner : 0;
  int64_t ist[4];
  for (int k = 0; k < p.nops; ++k) ist[k] = r ? p.strides[k][r - 1] : 0;
  parallel_region(p.numel > kParallelMin, [&](int t, int nt) {
    int64_t r0, r1;
    split_range(rows, t, nt, r0, r1);
    if (r0 < r1) {
      int64_t idx[kMaxDims];
      int64_t off[4] = {0, 0, 0, 0};
      int64_t rem = r0;
      for (int d = r - 2; d >= 0; --d) {
        idx[d] = rem % p.shape[d];
        rem /= p.shape[d];
        for (int k = 0; k < p.nops; ++k) off[k] += idx[d] * p.strides[k][d];
      }
      for (int64_t row = r0; row < r1; ++row) {
        f(row * inner, off, inner, ist);
        for (int d = r - 2; d >= 0; --d) {  // odometer step
          for (int k = 0; k < p.nops; ++k) off[k] += p.strides[k][d];
          if (++idx[d] < p.shape[d]) break;
          for (int k = 0; k < p.nops; ++k) off[k] -= p.strides[k][d] * p.shape[d];
          idx[d] = 0;
        }
      }
    }
  });
}

// Holds an operand converted to the compute dtype: a small inline slot for
// one-element operands, a scratch buffer (allocated in make) otherwise.
struct CastSlot {
  Buffer scratch;
  alignas(16) unsigned char one[16] = {};
  void prepare(const TensorType& t, DType to) {
    if (t.dtype != to && t.numel() > 1) scratch = Buffer(static_cast<size_t>(t.numel()) * dtype_size(to));
  }
  const void* get(const Tensor& in, DType to) {
    if (in.dtype == to) return in.data;
    if (in.numel() == 1) {
      cast_buffer(in.data, in.dtype, one, to, 1);
      return one;
    }
    cast_buffer(in.data, in.dtype, scratch.data(), to, in.numel());
    return scratch.data();
  }
};

}  // namespace ts
