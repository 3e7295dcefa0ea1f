// Transposed convolution (aten.convolution.default / convolution_backward
// with transposed=true), 1-D and 2-D, float32, on oneDNN's deconvolution
// primitives (conv_transpose.cpp). conv.cpp's infer/make hand such nodes here.
// These kernels take plain layouts only and have no fused relu form, so the
// passes ask conv_takes_blocked_relu() before they block or fuse a
// convolution node.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ops/op.h"

namespace ts {

// The node's "transposed" attribute (absent or null: false).
bool conv_attrs_transposed(const json& attrs);

// Whether a convolution node with these attributes runs the direct kernel,
// which reads and writes channel-blocked activations and has the fused relu
// forms (trainstep.conv2d_relu, trainstep.conv_backward_relu): false for
// transposed convolutions, which take plain layouts only and are not fused.
bool conv_takes_blocked_relu(const json& attrs);

// The type of convolution_backward's output 1 (grad_weight): the weight's,
// except that for a 1-D convolution whose output_mask[1] is false torch
// eager returns the 2-D view (w0, w1, 1, kL) of a tensor it never fills, so
// programs traced with real tensors declare that; the kernels leave it
// unwritten or write grad_weight there (the same bytes).
TensorType conv_grad_weight_type(const TensorType& weight, bool requested);

// Shared by the direct and transposed kernels (defined in conv.cpp):
// A spatial attribute (stride, padding, dilation) as (h, w): a 2-D
// convolution takes 1 or 2 values, a 1-D one exactly 1 (h gets one_d_h).
void conv_attr_hw(const NodeCtx& ctx, const std::string& k, int nd, int64_t one_d_h, int64_t& h,
                  int64_t& w);
// (h, w) as "HxW" for 2-D, "W" for 1-D, for messages.
std::string hw_str(int nd, int64_t h, int64_t w);
// convolution_backward's output_mask attribute: exactly 3 bools.
std::vector<bool> conv_output_mask(const NodeCtx& ctx);

// A direct convolution's geometry: input (N, C, H, W), weight (O, C/G, KH,
// KW), output (N, O, OH, OW). A 1-D convolution is the 2-D one with H = KH
// = OH = 1 (the same bytes; nd == 1 only at the node's boundary types).
struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, G, OH, OW;
  int64_t sh, sw, ph, pw, dh, dw;
  int nd = 2;  // spatial dims: 1 or 2
};

// Conv geometry from attrs (groups, stride, padding, dilation) and the
// input/weight types at inputs in_i and w_i, validated; every backend's. A
// 1-D convolution (input (N, C, L), weight (O, C/groups, kL)) is the 2-D
// one with H = kH = OH = 1: the same bytes, so every kernel runs it
// unchanged. Fails on transposed=true (conv_transpose.cpp's).
ConvGeom conv_geom(const NodeCtx& ctx, int in_i, int w_i);
// The output's shape as the node types it: rank 3 for a 1-D convolution.
Shape conv_out_shape(const ConvGeom& g);

// float64 transposed convolution on conv.cpp's im2col + Gemm64 kernels.
// `dual` is the direct convolution whose input gradient is this forward:
// its input is the transposed output (N, C_out, OH, OW), its weight the
// transposed weight as stored (C_in, C_out/G, kH, kW), its output the
// transposed input (N, C_in, H, W). Forward: dual's input gradient, plus
// bias. Backward: grad_input is dual's forward of grad_output, grad_weight
// dual's weight gradient with the roles of input and output swapped.
std::unique_ptr<Kernel> conv64_transposed_fwd(const ConvGeom& dual, bool bias, int threads);
std::unique_ptr<Kernel> conv64_transposed_bwd(const ConvGeom& dual, bool want_in, bool want_w,
                                              bool want_b, int threads);

namespace conv_transpose {

// aten.convolution.default with transposed=true.
std::vector<TensorType> infer_fwd(const NodeCtx& ctx);
std::unique_ptr<Kernel> make_fwd(const KernelCtx& k);
// aten.convolution_backward.default with transposed=true.
std::vector<TensorType> infer_bwd(const NodeCtx& ctx);
std::unique_ptr<Kernel> make_bwd(const KernelCtx& k);

}  // namespace conv_transpose

// The ops' names, spelled once: their registration and every backend's
// kernel table use these.
namespace opname {
inline constexpr const char* convolution = "aten.convolution.default";
inline constexpr const char* convolution_backward = "aten.convolution_backward.default";
}  // namespace opname

}  // namespace ts
