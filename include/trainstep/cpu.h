// Which instruction-set level the hand-written kernels run at. A build
// carries every level (scalar, AVX2, AVX-512) and picks the best this CPU has
// at run time, so one binary runs at full speed on AVX2-only and AVX-512
// machines. A lower level can be forced, for tests and for measuring what an
// AVX2 machine would do: limit_cpu_isa(), or the environment variable
// TRAINSTEP_ISA=scalar|avx2|avx512 (read by Session::open and the CLI).
//
// "scalar" is the portable C++ path of each kernel, compiled for the build's
// baseline architecture (CMake's TRAINSTEP_ARCH), without hand intrinsics.
// TRAINSTEP_ISA also caps oneDNN's own dispatch (AVX2, or SSE4.1 for
// scalar), and OpenBLAS's (OPENBLAS_CORETYPE=Haswell or Nehalem, unless
// set), as an AVX2 machine would have it; limit_cpu_isa() does not, since
// both fix their level once, oneDNN at its first primitive and OpenBLAS
// when it loads.
#pragma once
#include <string>

namespace ts {

enum class CpuIsa : int { Scalar = 0, Avx2 = 1, Avx512 = 2 };

// The best level this CPU and OS support (AVX2 needs AVX2 and FMA; AVX-512
// needs F, BW, DQ and VL).
CpuIsa detected_cpu_isa();
// The level kernels use now: detected_cpu_isa() unless limited.
CpuIsa cpu_isa();
// Our kernels run at most `isa` from now on (also back up to the detected
// level). Process-wide: every session's next kernel call sees it (each
// kernel reads the level per call, so a change mid-step is safe, only
// mixed). Throws ts::Error when the CPU lacks it.
void limit_cpu_isa(CpuIsa isa);
// Applies TRAINSTEP_ISA if it is set: limit_cpu_isa, and oneDNN's cap if
// oneDNN has not started. Throws ts::Error naming the variable for an
// unknown value or one above what the CPU has.
void apply_cpu_isa_env();

// Throws ts::Error when this CPU lacks what the build's baseline
// (TRAINSTEP_ARCH) assumes, e.g. AVX2 for the default x86-64-v3, rather than
// dying of an illegal instruction later. Session and the CLI call it first.
void check_cpu_baseline();

const char* cpu_isa_name(CpuIsa isa);  // "scalar", "avx2", "avx512"
// Throws ts::Error for anything but the three names.
CpuIsa parse_cpu_isa(const std::string& name);

}  // namespace ts
