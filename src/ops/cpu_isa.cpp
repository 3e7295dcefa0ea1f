// Run-time ISA detection and the process-wide level (include/trainstep/cpu.h).
#include "trainstep/cpu.h"

#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <cstdlib>

#include "trainstep/error.h"

#ifndef TRAINSTEP_ARCH_NAME
#define TRAINSTEP_ARCH_NAME "this compiler's default"
#endif

namespace ts {

namespace {

CpuIsa detect() {
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports also checks that the OS saves the wide registers.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("fma"))
    return CpuIsa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::Avx2;
#endif
  return CpuIsa::Scalar;
}

std::atomic<int>& level() {
  static std::atomic<int> l{static_cast<int>(detected_cpu_isa())};
  return l;
}

}  // namespace

CpuIsa detected_cpu_isa() {
  static const CpuIsa d = detect();
  return d;
}

CpuIsa cpu_isa() { return static_cast<CpuIsa>(level().load(std::memory_order_relaxed)); }

void limit_cpu_isa(CpuIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(detected_cpu_isa()))
    fail(std::string("cannot run at ISA level ") + cpu_isa_name(isa) + ": this CPU supports " +
         cpu_isa_name(detected_cpu_isa()) + " at most");
  level().store(static_cast<int>(isa), std::memory_order_relaxed);
}

void check_cpu_baseline() {
#if defined(__x86_64__)
  bool ok = true;
#if defined(__AVX2__)
  ok = ok && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#if defined(__AVX512F__)
  ok = ok && __builtin_cpu_supports("avx512f");
#endif
  if (!ok)
    fail(std::string("this trainstep was built for ") + TRAINSTEP_ARCH_NAME +
         ", whose instructions this CPU lacks (it supports " + cpu_isa_name(detected_cpu_isa()) +
         " at most); rebuild with cmake -DTRAINSTEP_ARCH=x86-64-v2");
#endif
}

void apply_cpu_isa_env() {
  const char* v = std::getenv("TRAINSTEP_ISA");
  if (!v || !*v) return;
  CpuIsa isa;
  try {
    isa = parse_cpu_isa(v);
    limit_cpu_isa(isa);
  } catch (const Error& e) {
    fail(std::string("TRAINSTEP_ISA=") + v + ": " + e.what());
  }
  // oneDNN takes this only before its first primitive, once; later calls
  // fail and it keeps the level it started with, which is not an error here.
  if (isa != CpuIsa::Avx512)
    dnnl_set_max_cpu_isa(isa == CpuIsa::Avx2 ? dnnl_cpu_isa_avx2 : dnnl_cpu_isa_sse41);
  // OpenBLAS (ops/openblas.h) reads this when it loads, at the first GEMM
  // that measures it; a value the user set wins.
  if (isa != CpuIsa::Avx512)
    setenv("OPENBLAS_CORETYPE", isa == CpuIsa::Avx2 ? "Haswell" : "Nehalem", 0);
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return "scalar";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "unknown";
}

CpuIsa parse_cpu_isa(const std::string& name) {
  for (CpuIsa i : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512})
    if (name == cpu_isa_name(i)) return i;
  fail("unknown ISA level '" + name + "' (expected scalar, avx2 or avx512)");
}

}  // namespace ts
