// Runs a test body once at each kernel ISA level this CPU has (scalar,
// AVX2, AVX-512; trainstep/cpu.h), so one machine checks every path.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "trainstep/cpu.h"

namespace isatest {

template <class F>
void for_each_isa(F&& body) {
  const ts::CpuIsa was = ts::cpu_isa();
  for (int l = 0; l <= static_cast<int>(ts::detected_cpu_isa()); ++l) {
    const auto isa = static_cast<ts::CpuIsa>(l);
    ts::limit_cpu_isa(isa);
    SCOPED_TRACE(std::string("ISA level ") + ts::cpu_isa_name(isa));
    body(isa);
  }
  ts::limit_cpu_isa(was);
}

}  // namespace isatest
