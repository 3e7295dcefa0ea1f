// What the passes that rewrite matrix products ask of a node: is it one
// (aten.mm or trainstep.matmul, by FuseRole), and its transposition flags.
#pragma once
#include "ir/program.h"

namespace ts {

inline bool is_product(const Node& n) {
  const FuseRole r = def_of(n).fuse_role;
  return r == FuseRole::MatMul || r == FuseRole::MatMulT;
}

// trans_a / trans_b of a product or addmm (false for aten.mm and aten.addmm).
inline bool product_flag(const Node& n, const char* k) {
  const FuseRole r = def_of(n).fuse_role;
  if ((r != FuseRole::MatMulT && r != FuseRole::AddMmT) || !n.attrs.contains(k)) return false;
  return n.attrs[k].is_boolean() && n.attrs[k].get<bool>();
}

}  // namespace ts
