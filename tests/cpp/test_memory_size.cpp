// The CLI's --max-memory format (tools/memory_size.cpp, built into this test
// binary too: the library takes bytes).
#include <gtest/gtest.h>

#include "memory_size.h"
#include "test_util.h"

TEST(MemorySize, Parses) {
  EXPECT_EQ(tscli::parse_memory_size("1024"), 1024u);
  EXPECT_EQ(tscli::parse_memory_size("512M"), 512u << 20);
  EXPECT_EQ(tscli::parse_memory_size("1.5GiB"), 3u << 29);
  EXPECT_EQ(tscli::parse_memory_size("2GB"), 2u << 30);
  for (const char* bad : {"", "0", "-1G", "1X", "G", "1e300", "nan"})
    EXPECT_EQ(ts_test::error_of([&] { tscli::parse_memory_size(bad); }),
              std::string("bad memory size '") + bad +
                  "' (expected e.g. 512M, 2G, 1.5GiB or a byte count)");
}
