// The float32 twin of a bfloat16 node: its types and dtype attrs with
// bfloat16 made float32. ViaFloat32 kernels (op.h) and the fused
// elementwise kernel's tile forms are built from it.
#pragma once
#include "ops/op.h"

namespace ts {

json float32_attrs(const json& attrs);
TensorType float32_type(TensorType t);

}  // namespace ts
