// The pointwise program: every elementwise op, alone or as a fused group,
// runs as one launch of one interpreter kernel. Each thread takes elements
// of the output shape, loads its inputs (contiguous, one element, or
// broadcast by strides), runs the instructions over double registers, and
// stores the outputs. Each instruction computes in its op's compute dtype
// (float32 arithmetic in float, as the CPU kernels do), so results match
// the CPU's to the last bit for + - * / sqrt and comparisons; the
// transcendental functions are CUDA's (within an ulp or two).
#pragma once
#include "cuda/launch.h"

namespace ts::cuda::pw {

// Element types as stored (mirrors ts::DType's order).
enum Type : uint8_t { F32, F64, I64, I32, U8, Bool };

enum Op : uint8_t {
  Load,   // r = input a0
  Const,  // r = s
  Add, Sub, Mul, Div, Max, Min, Pow,  // a0 op a1 (Add/Sub: a0 +- alpha * a1)
  Eq, Ne, Lt, Le, Gt, Ge,             // -> bool
  PowScalar,                          // a0 ** s (the CPU's special cases)
  Where,                              // a0 ? a1 : a2
  Neg, Exp, Expm1, Log, Log1p, Sqrt, Rsqrt, Abs, Relu, Sigmoid, Tanh, Cos, Sin, Reciprocal, Sign,
  Erf, Gelu, GeluTanh,
  Cast,   // r = a0 converted to out
  Clamp,  // a0 bounded below by s (flags & 1) and above by alpha (flags & 2)
};

constexpr int kMaxInstr = 160;
constexpr int kMaxRegs = 40;
constexpr int kMaxInputs = 12;
constexpr int kMaxOutputs = 8;

struct Instr {
  uint8_t op = Load;
  uint8_t ct = F32;   // compute type
  uint8_t out = F32;  // type of the result (rounded to it)
  uint8_t dst = 0;    // register
  uint8_t flags = 0;  // Clamp: which bounds it has
  int16_t a[3] = {-1, -1, -1};  // registers, or the input index for Load
  double s = 0;       // Const value, PowScalar exponent
  double alpha = 1;   // Add/Sub
};

struct Input {
  const void* data = nullptr;
  uint8_t type = F32;
  uint8_t kind = 0;  // 0 contiguous in the output's index, 1 one element, 2 strided
  Strided at;
};

struct Output {
  void* data = nullptr;
  uint8_t type = F32;
  uint8_t reg = 0;
};

struct Program {
  int64_t numel = 0;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int n_instr = 0, n_in = 0, n_out = 0;
  bool strided = false;  // some input is kind 2
  Input in[kMaxInputs];
  Output out[kMaxOutputs];
  Instr code[kMaxInstr];
};

void launch(const Program& p, cudaStream_t s);

}  // namespace ts::cuda::pw
