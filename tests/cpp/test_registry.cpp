#include <gtest/gtest.h>

#include "ops/op.h"

TEST(Registry, NamesAreUnique) {
  const auto& ops = ts::OpRegistry::get().all();
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t j = i + 1; j < ops.size(); ++j) EXPECT_NE(ops[i].name, ops[j].name);
}
