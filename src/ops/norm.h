// Batch and layer norm: the ops' names, spelled once. Their registration (src/ops)
// and every backend's kernel table use these.
#pragma once

namespace ts::opname {

inline constexpr const char* batch_norm = "aten.native_batch_norm.default";
// batch_norm with relu applied to output 0 (the fuse_conv_relu pass makes it).
inline constexpr const char* batch_norm_relu = "trainstep.batch_norm_relu";
inline constexpr const char* batch_norm_backward = "aten.native_batch_norm_backward.default";
// batch_norm whose output 0 only pointwise groups read: one runs on it as
// it is made, the others recompute it in batch_norm_backward_prologue
// (the fuse_batch_norm_groups pass makes both).
inline constexpr const char* batch_norm_epilogue = "trainstep.batch_norm_epilogue";
inline constexpr const char* batch_norm_backward_prologue = "trainstep.batch_norm_backward_prologue";
inline constexpr const char* layer_norm = "aten.native_layer_norm.default";
inline constexpr const char* layer_norm_backward = "aten.native_layer_norm_backward.default";

}  // namespace ts::opname
