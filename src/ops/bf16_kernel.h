// The float32 twin of a bfloat16 node: its types and dtype attrs with
// bfloat16 made float32. ViaFloat32 kernels (op.h) and the fused
// elementwise kernel's tile forms are built from it.
#pragma once
#include "ops/op.h"

namespace ts {

json float32_attrs(const json& attrs);
TensorType float32_type(TensorType t);

// The node's float32 twin between conversions (what make_kernel builds for
// a ViaFloat32 op), for a Native op whose bfloat16 form cannot run here: a
// transposed convolution, or a CPU where oneDNN has no bfloat16 products.
std::unique_ptr<Kernel> make_via_float32(const OpDef& def, const KernelCtx& ctx);

}  // namespace ts
