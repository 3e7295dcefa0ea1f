// Device code of the reductions (reduce.cpp plans them), following
// src/ops/reduce.cpp: each input element is converted to the compute type
// CT first; float sums accumulate in double and round once, integer sums in
// int64 (wrapping), max/min propagate NaN. Forms:
//   rows    [O, R] (I == 1): one block per (o, chunk of R), tree-reduced;
//   cols    [O, R, I]: one thread per (o, chunk of R, i);
//   general: one thread per output, walking the reduced dims by strides.
// With P > 1 chunks the chunks' accumulators go to the workspace and a merge
// pass adds them in chunk order.
#include "cuda/launch.h"
#include "cuda/rows.h"

#include <type_traits>

namespace ts::cuda {

namespace {

using namespace rowk;

template <class T>
struct Lim;
template <>
struct Lim<float> {
  __device__ static float lo() { return -__int_as_float(0x7f800000); }
  __device__ static float hi() { return __int_as_float(0x7f800000); }
};
template <>
struct Lim<double> {
  __device__ static double lo() { return -__longlong_as_double(0x7ff0000000000000LL); }
  __device__ static double hi() { return __longlong_as_double(0x7ff0000000000000LL); }
};
template <>
struct Lim<int64_t> {
  __device__ static int64_t lo() { return -9223372036854775807LL - 1; }
  __device__ static int64_t hi() { return 9223372036854775807LL; }
};
template <>
struct Lim<int32_t> {
  __device__ static int32_t lo() { return -2147483647 - 1; }
  __device__ static int32_t hi() { return 2147483647; }
};
template <>
struct Lim<uint8_t> {
  __device__ static uint8_t lo() { return 0; }
  __device__ static uint8_t hi() { return 255; }
};

template <class T>
constexpr bool is_float_v = std::is_same<T, float>::value || std::is_same<T, double>::value;

// The accumulator of OP over compute type CT.
template <class CT, RedOp OP>
using AccOf = typename std::conditional<
    OP == RedOp::Max || OP == RedOp::Min, CT,
    typename std::conditional<is_float_v<CT>, double, unsigned long long>::type>::type;

template <class In, class CT, RedOp OP>
struct Red {
  using A = AccOf<CT, OP>;
  __device__ static A init() {
    if constexpr (OP == RedOp::Max) return Lim<CT>::lo();
    else if constexpr (OP == RedOp::Min) return Lim<CT>::hi();
    else return A(0);
  }
  __device__ static A merge(A a, A b) {
    if constexpr (OP == RedOp::Max) return (b > a || b != b) ? b : a;
    else if constexpr (OP == RedOp::Min) return (b < a || b != b) ? b : a;
    else return a + b;  // unsigned for integers: wraps like the CPU's int64
  }
  __device__ static A step(A a, In x) {
    const CT v = static_cast<CT>(x);
    if constexpr (OP == RedOp::Max || OP == RedOp::Min) return merge(a, v);
    else if constexpr (is_float_v<CT>) return a + double(v);
    else return a + static_cast<unsigned long long>(static_cast<int64_t>(v));
  }
  __device__ static CT fin(A a, double count) {
    if constexpr (OP == RedOp::Mean) return static_cast<CT>(a / count);
    else if constexpr (OP == RedOp::Sum && !is_float_v<CT>) return static_cast<CT>(static_cast<int64_t>(a));
    else return static_cast<CT>(a);
  }
};

template <class In, class CT, RedOp OP>
__global__ void red_rows(ReduceParams p) {
  using R_ = Red<In, CT, OP>;
  using A = typename R_::A;
  __shared__ A sh[256];
  const In* x = static_cast<const In*>(p.x);
  const unsigned t = threadIdx.x;
  for (int64_t blk = blockIdx.x; blk < p.O * p.P; blk += gridDim.x) {
    const int64_t o = blk / p.P, q = blk % p.P;
    const int64_t r1 = min(p.R, (q + 1) * p.chunk);
    A acc = R_::init();
    for (int64_t r = q * p.chunk + t; r < r1; r += blockDim.x) acc = R_::step(acc, x[o * p.R + r]);
    __syncthreads();  // sh may still be read from the previous block's work
    sh[t] = acc;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {  // blockDim.x: a power of 2
      if (t < w) sh[t] = R_::merge(sh[t], sh[t + w]);
      __syncthreads();
    }
    if (t == 0) {
      if (p.P == 1) static_cast<CT*>(p.out)[o] = R_::fin(sh[0], p.count);
      else static_cast<A*>(p.part)[o * p.P + q] = sh[0];
    }
  }
}

template <class In, class CT, RedOp OP>
__global__ void red_cols(ReduceParams p) {
  using R_ = Red<In, CT, OP>;
  using A = typename R_::A;
  const In* x = static_cast<const In*>(p.x);
  const int64_t I = p.I, n = p.O * p.P * I;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = t % I, oq = t / I, q = oq % p.P, o = oq / p.P;
    const int64_t r1 = min(p.R, (q + 1) * p.chunk);
    A acc = R_::init();
    for (int64_t r = q * p.chunk; r < r1; ++r) acc = R_::step(acc, x[(o * p.R + r) * I + i]);
    if (p.P == 1) static_cast<CT*>(p.out)[o * I + i] = R_::fin(acc, p.count);
    else static_cast<A*>(p.part)[oq * I + i] = acc;
  }
}

template <class In, class CT, RedOp OP>
__global__ void red_merge(ReduceParams p) {
  using R_ = Red<In, CT, OP>;
  using A = typename R_::A;
  const A* part = static_cast<const A*>(p.part);
  const int64_t I = p.I;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < p.O * I;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = t / I, i = t % I;
    A acc = part[o * p.P * I + i];
    for (int64_t q = 1; q < p.P; ++q) acc = R_::merge(acc, part[(o * p.P + q) * I + i]);
    static_cast<CT*>(p.out)[t] = R_::fin(acc, p.count);
  }
}

template <class In, class CT, RedOp OP>
__global__ void red_general(ReduceParams p) {
  using R_ = Red<In, CT, OP>;
  using A = typename R_::A;
  const In* x = static_cast<const In*>(p.x);
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < p.out_numel;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t off = 0, rem = o;
    for (int d = p.nk - 1; d >= 0; --d) {
      off += (rem % p.kshape[d]) * p.kstride[d];
      rem /= p.kshape[d];
    }
    int64_t idx[kMaxRank] = {};
    A acc = R_::init();
    for (;;) {  // odometer over the reduced dims (each of size >= 2)
      acc = R_::step(acc, x[off]);
      int d = p.nr - 1;
      for (; d >= 0; --d) {
        off += p.rstride[d];
        if (++idx[d] < p.rshape[d]) break;
        off -= p.rstride[d] * p.rshape[d];
        idx[d] = 0;
      }
      if (d < 0) break;
    }
    static_cast<CT*>(p.out)[o] = R_::fin(acc, p.count);
  }
}

template <class In, class CT, RedOp OP>
void run(const ReduceParams& p, cudaStream_t s) {
  if (p.general) {
    red_general<In, CT, OP><<<blocks_for(p.out_numel, 256), 256, 0, s>>>(p);
    return;
  }
  if (p.I == 1) red_rows<In, CT, OP><<<grid_for(p.O * p.P), p.threads, 0, s>>>(p);
  else red_cols<In, CT, OP><<<blocks_for(p.O * p.P * p.I, 256), 256, 0, s>>>(p);
  if (p.P > 1) red_merge<In, CT, OP><<<blocks_for(p.O * p.I, 256), 256, 0, s>>>(p);
}

// Calls f with a value of the C++ type of e.
template <class F>
void with_elem(Elem e, F f) {
  switch (e) {
    case Elem::F32: return f(float());
    case Elem::F64: return f(double());
    case Elem::I64: return f(int64_t());
    case Elem::I32: return f(int32_t());
    case Elem::U8: return f(uint8_t());
  }
}

template <RedOp OP>
void run_op(const ReduceParams& p, cudaStream_t s) {
  with_elem(p.in, [&](auto in_tag) {
    using In = decltype(in_tag);
    if constexpr (OP == RedOp::Max || OP == RedOp::Min) {
      run<In, In, OP>(p, s);  // the host plans ct == in
    } else {
      switch (p.ct) {
        case Elem::F32: return run<In, float, OP>(p, s);
        case Elem::F64: return run<In, double, OP>(p, s);
        case Elem::I64:
          if constexpr (OP == RedOp::Sum) return run<In, int64_t, OP>(p, s);
          return;
        default: return;  // refused by the host
      }
    }
  });
}

// ---- argmax -----------------------------------------------------------------

// First maximum wins; a NaN counts as the maximum (its first occurrence).
template <class T>
__global__ void argmax_lines(ArgmaxParams p) {
  const T* x = static_cast<const T*>(p.x);
  const int64_t R = p.R, I = p.I;
  for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; line < p.O * I;
       line += int64_t(gridDim.x) * blockDim.x) {
    const T* xs = x + (line / I) * R * I + line % I;
    T best = xs[0];
    int64_t bi = 0;
    if (!(best != best)) {
      for (int64_t r = 1; r < R; ++r) {
        const T v = xs[r * I];
        if (v != v) {
          bi = r;
          break;
        }
        if (v > best) {
          best = v;
          bi = r;
        }
      }
    }
    p.out[line] = bi;
  }
}

}  // namespace

void launch_reduce(const ReduceParams& p, cudaStream_t s) {
  if (p.out_numel <= 0) return;
  switch (p.op) {
    case RedOp::Sum: return run_op<RedOp::Sum>(p, s);
    case RedOp::Mean: return run_op<RedOp::Mean>(p, s);
    case RedOp::Max: return run_op<RedOp::Max>(p, s);
    case RedOp::Min: return run_op<RedOp::Min>(p, s);
  }
}

void launch_argmax(const ArgmaxParams& p, cudaStream_t s) {
  if (p.O * p.I <= 0 || p.R <= 0) return;
  with_elem(p.in, [&](auto tag) {
    using T = decltype(tag);
    argmax_lines<T><<<blocks_for(p.O * p.I, 256), 256, 0, s>>>(p);
  });
}

}  // namespace ts::cuda
