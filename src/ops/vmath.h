// Vectorised float32 exp, log, erf and tanh over arrays, through glibc's
// libmvec: the vector variants GCC itself calls for these functions under
// -ffast-math (glibc documents at most 4 ULP for them; eager PyTorch uses
// SLEEF's 1-ULP vector variants). One implementation serves the kernels and
// the fused tile forms, so fused and unfused results stay identical.
// y may equal x. The level is chosen at run time (trainstep/cpu.h): AVX-512,
// AVX2, or the scalar functions.
#pragma once
#include <cstdint>

namespace ts {

void vexp(const float* x, float* y, int64_t n);
void vlog(const float* x, float* y, int64_t n);
void verf(const float* x, float* y, int64_t n);
void vtanh(const float* x, float* y, int64_t n);

}  // namespace ts
