// Device code of the pointwise interpreter (pointwise.h).
#include <cmath>
#include <cstdint>

#include "cuda/pointwise.h"

namespace ts::cuda::pw {

namespace {

__device__ double load(const Input& in, int64_t off) {
  switch (in.type) {
    case F32: return static_cast<const float*>(in.data)[off];
    case F64: return static_cast<const double*>(in.data)[off];
    case I64: return static_cast<double>(static_cast<const int64_t*>(in.data)[off]);
    case I32: return static_cast<const int32_t*>(in.data)[off];
    default: return static_cast<const uint8_t*>(in.data)[off];  // U8, Bool
  }
}

__device__ void store(const Output& o, int64_t i, double v) {
  switch (o.type) {
    case F32: static_cast<float*>(o.data)[i] = static_cast<float>(v); break;
    case F64: static_cast<double*>(o.data)[i] = v; break;
    case I64: static_cast<int64_t*>(o.data)[i] = static_cast<int64_t>(v); break;
    case I32: static_cast<int32_t*>(o.data)[i] = static_cast<int32_t>(v); break;
    case U8: static_cast<uint8_t*>(o.data)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    default: static_cast<uint8_t*>(o.data)[i] = v != 0; break;
  }
}

// A value converted to a type and back, as storing it would.
__device__ double round_to(uint8_t t, double v) {
  switch (t) {
    case F32: return static_cast<float>(v);
    case F64: return v;
    case Bool: return v != 0 ? 1.0 : 0.0;
    case U8: return static_cast<uint8_t>(static_cast<int64_t>(v));
    case I32: return static_cast<int32_t>(v);
    default: return static_cast<double>(static_cast<int64_t>(v));
  }
}

template <class T>
__device__ T pow_scalar(T x, double e) {
  if (e == 2) return x * x;
  if (e == 3) return x * x * x;
  if (e == 0.5) return sqrt(x);
  if (e == -0.5) return T(1) / sqrt(x);
  if (e == -1) return T(1) / x;
  if (e == -2) return T(1) / (x * x);
  if (e == 1) return x;
  return pow(x, static_cast<T>(e));
}

// Floating-point arithmetic in T (float or double), as the CPU's functors.
template <class T>
__device__ double eval_float(const Instr& I, double x0, double x1, double x2) {
  const T x = static_cast<T>(x0), y = static_cast<T>(x1);
  switch (I.op) {
    case Add: return I.alpha == 1 ? x + y : x + static_cast<T>(I.alpha) * y;
    case Sub: return I.alpha == 1 ? x - y : x - static_cast<T>(I.alpha) * y;
    case Mul: return x * y;
    case Div: return x / y;
    case Max: return (x > y || x != x) ? x : y;
    case Min: return (x < y || x != x) ? x : y;
    case Pow: return pow(x, y);
    case Eq: return x == y;
    case Ne: return x != y;
    case Lt: return x < y;
    case Le: return x <= y;
    case Gt: return x > y;
    case Ge: return x >= y;
    case PowScalar: return pow_scalar<T>(x, I.s);
    case Where: return x0 != 0 ? static_cast<T>(x1) : static_cast<T>(x2);
    case Neg: return -x;
    case Exp: return exp(x);
    case Expm1: return expm1(x);
    case Log: return log(x);
    case Log1p: return log1p(x);
    case Sqrt: return sqrt(x);
    case Rsqrt: return T(1) / sqrt(x);
    case Abs: return x < 0 ? -x : x;
    case Relu: return x < 0 ? T(0) : x;
    case Sigmoid: return T(1) / (T(1) + exp(-x));
    case Tanh: return tanh(x);
    case Cos: return cos(x);
    case Sin: return sin(x);
    case Reciprocal: return T(1) / x;
    case Sign: return static_cast<T>((T(0) < x) - (x < T(0)));
    case Erf: return erf(x);
    case Gelu: return x * T(0.5) * (T(1) + erf(x * static_cast<T>(M_SQRT1_2)));
    case GeluTanh: {
      const T k = static_cast<T>(M_SQRT2 * M_2_SQRTPI * 0.5);
      return T(0.5) * x * (T(1) + tanh(k * (x + T(0.044715) * x * x * x)));
    }
    case Clamp: {  // as the CPU's: comparisons with NaN are false, so NaN stays
      const T lo = static_cast<T>(I.s), hi = static_cast<T>(I.alpha);
      const T v = (I.flags & 1) && x < lo ? lo : x;
      return (I.flags & 2) && v > hi ? hi : v;
    }
    default: return x;  // Cast
  }
}

// Integer arithmetic in int64 (wrapping as the CPU's), bool as logic.
__device__ double eval_int(const Instr& I, double x0, double x1, double x2) {
  const int64_t x = static_cast<int64_t>(x0), y = static_cast<int64_t>(x1);
  const uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  const int64_t al = static_cast<int64_t>(I.alpha);
  switch (I.op) {
    case Add:
      if (I.ct == Bool) return (x | y) != 0;
      return static_cast<double>(static_cast<int64_t>(ux + static_cast<uint64_t>(al) * uy));
    case Sub: return static_cast<double>(static_cast<int64_t>(ux - static_cast<uint64_t>(al) * uy));
    case Mul:
      if (I.ct == Bool) return (x & y) != 0;
      return static_cast<double>(static_cast<int64_t>(ux * uy));
    case Max: return I.ct == Bool ? double((x | y) != 0) : double(x > y ? x : y);
    case Min: return I.ct == Bool ? double((x & y) != 0) : double(x < y ? x : y);
    case Eq: return x == y;
    case Ne: return x != y;
    case Lt: return x < y;
    case Le: return x <= y;
    case Gt: return x > y;
    case Ge: return x >= y;
    case Where: return x0 != 0 ? x1 : x2;
    case Neg: return static_cast<double>(static_cast<int64_t>(0 - ux));
    case Abs: return x < 0 ? static_cast<double>(static_cast<int64_t>(0 - ux)) : x0;
    case Relu: return x < 0 ? 0.0 : x0;
    case Sign: return static_cast<double>((0 < x) - (x < 0));
    case Clamp: {
      const int64_t lo = static_cast<int64_t>(I.s), hi = static_cast<int64_t>(I.alpha);
      const int64_t v = (I.flags & 1) && x < lo ? lo : x;
      return static_cast<double>((I.flags & 2) && v > hi ? hi : v);
    }
    default: return x0;  // Cast
  }
}

__global__ void run_program(const __grid_constant__ Program p) {
  double r[kMaxRegs];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel;
       i += step) {
    int64_t idx[kMaxRank];
    if (p.strided) {
      int64_t rest = i;
      for (int d = p.rank - 1; d >= 0; --d) {
        idx[d] = rest % p.shape[d];
        rest /= p.shape[d];
      }
    }
    for (int k = 0; k < p.n_instr; ++k) {
      const Instr& I = p.code[k];
      double v;
      if (I.op == Load) {
        const Input& in = p.in[I.a[0]];
        int64_t off = i;
        if (in.kind == 1) {
          off = 0;
        } else if (in.kind == 2) {
          off = in.at.offset;
          for (int d = 0; d < p.rank; ++d) off += idx[d] * in.at.stride[d];
        }
        v = load(in, off);
      } else if (I.op == Const) {
        v = I.s;
      } else {
        const double x0 = r[I.a[0]];
        const double x1 = I.a[1] >= 0 ? r[I.a[1]] : 0.0;
        const double x2 = I.a[2] >= 0 ? r[I.a[2]] : 0.0;
        if (I.ct == F32) v = eval_float<float>(I, x0, x1, x2);
        else if (I.ct == F64) v = eval_float<double>(I, x0, x1, x2);
        else v = eval_int(I, x0, x1, x2);
        v = round_to(I.out, v);
      }
      r[I.dst] = v;
    }
    for (int j = 0; j < p.n_out; ++j)
      if (p.out[j].data) store(p.out[j], i, r[p.out[j].reg]);
  }
}

}  // namespace

void launch(const Program& p, cudaStream_t s) {
  if (p.numel == 0) return;
  run_program<<<blocks_for(p.numel), 256, 0, s>>>(p);
}

}  // namespace ts::cuda::pw
