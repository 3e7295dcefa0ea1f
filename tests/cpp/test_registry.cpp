#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "ops/op.h"

TEST(Registry, NamesAreUnique) {
  const auto& ops = ts::OpRegistry::get().all();
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t j = i + 1; j < ops.size(); ++j) EXPECT_NE(ops[i].name, ops[j].name);
}

// Passes find a pattern's ops by FuseRole: each role is one op's.
TEST(Registry, FuseRolesAreOneOpEach) {
  std::map<ts::FuseRole, std::vector<std::string>> by_role;
  for (const auto& op : ts::OpRegistry::get().all())
    if (op.fuse_role != ts::FuseRole::None) by_role[op.fuse_role].push_back(op.name);
  EXPECT_EQ(by_role.size(), static_cast<size_t>(ts::FuseRole::SwapDims));  // all but None (SwapDims is last)
  for (const auto& [role, names] : by_role) EXPECT_EQ(names.size(), 1u) << names[0];
}

// The fused forms the relu rewrites produce exist, and only the roles that
// have a relu fusion name one.
TEST(Registry, ReluFusedFormsAreRegistered) {
  const auto& reg = ts::OpRegistry::get();
  for (const auto& op : reg.all()) {
    const auto r = op.fuse_role;
    const bool has = r == ts::FuseRole::Conv || r == ts::FuseRole::ConvBackward ||
                     r == ts::FuseRole::MaxPool || r == ts::FuseRole::MaxPoolBackward ||
                     r == ts::FuseRole::BatchNorm;
    EXPECT_EQ(op.relu_fused != nullptr, has) << op.name;
    if (op.relu_fused) {
      EXPECT_NE(reg.find(op.relu_fused), nullptr) << op.name;
    }
  }
}

// fold_constants writes trainstep.constant by name: it must be the literal.
TEST(Registry, TheLiteralConstantIsTrainstepConstant) {
  int literals = 0;
  for (const auto& op : ts::OpRegistry::get().all())
    if (op.constant == ts::ConstRole::Literal) {
      ++literals;
      EXPECT_EQ(op.name, "trainstep.constant");
    }
  EXPECT_EQ(literals, 1);
}
