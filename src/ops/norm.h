// Batch and layer norm: the ops' names, spelled once. Their registration (src/ops)
// and every backend's kernel table use these.
#pragma once

namespace ts::opname {

inline constexpr const char* batch_norm = "aten.native_batch_norm.default";
// batch_norm with relu applied to output 0 (the fuse_conv_relu pass makes it).
inline constexpr const char* batch_norm_relu = "trainstep.batch_norm_relu";
inline constexpr const char* batch_norm_backward = "aten.native_batch_norm_backward.default";
inline constexpr const char* layer_norm = "aten.native_layer_norm.default";
inline constexpr const char* layer_norm_backward = "aten.native_layer_norm_backward.default";

}  // namespace ts::opname
