// The ISA level API (trainstep/cpu.h): names, the limit, and its errors.
#include <gtest/gtest.h>

#include "isa_levels.h"
#include "test_util.h"
#include "trainstep/cpu.h"
#include "trainstep/error.h"

namespace {

using ts_test::error_of;

TEST(CpuIsa, NamesRoundTripAndUnknownOnesAreRefused) {
  for (ts::CpuIsa i : {ts::CpuIsa::Scalar, ts::CpuIsa::Avx2, ts::CpuIsa::Avx512})
    EXPECT_EQ(ts::parse_cpu_isa(ts::cpu_isa_name(i)), i);
  EXPECT_EQ(error_of([] { ts::parse_cpu_isa("sse2"); }),
            "unknown ISA level 'sse2' (expected scalar, avx2 or avx512)");
}

TEST(CpuIsa, TheLimitIsFollowed) {
  std::vector<ts::CpuIsa> seen;
  isatest::for_each_isa([&](ts::CpuIsa isa) {
    EXPECT_EQ(ts::cpu_isa(), isa);
    seen.push_back(isa);
  });
  EXPECT_EQ(seen.size(), static_cast<size_t>(ts::detected_cpu_isa()) + 1);
  EXPECT_EQ(ts::cpu_isa(), ts::detected_cpu_isa());  // restored
}

TEST(CpuIsa, ALevelAboveTheCpusIsRefused) {
  if (ts::detected_cpu_isa() == ts::CpuIsa::Avx512) GTEST_SKIP() << "no level above this CPU's";
  const auto above = static_cast<ts::CpuIsa>(static_cast<int>(ts::detected_cpu_isa()) + 1);
  EXPECT_NE(error_of([&] { ts::limit_cpu_isa(above); }).find("this CPU supports"), std::string::npos);
}

}  // namespace
