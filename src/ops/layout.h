// Activation layouts between oneDNN convolutions. The plan_layouts pass may
// store a 4-D float32 value (N, C, H, W) that only convolutions produce and
// read in oneDNN's channel-blocked layout (nChw8c / nChw16c), or a bfloat16
// one channels-last (nhwc: oneDNN's AMX and AVX512_BF16 convolutions run
// fastest there), so no reorder runs at either end. It records the choice in the nodes' attributes
// "in_layouts" / "out_layouts" (one name per port, "plain" by default); the
// channel count must be a multiple of the block, so the byte size, and the
// memory plan, are the same as the plain layout's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/op.h"

namespace ts {

enum class Layout { Plain, Blocked8, Blocked16, ChannelsLast };  // nchw, nChw8c, nChw16c, nhwc

const char* layout_name(Layout l);
// Channels per block of the blocked layouts; 1 for plain. Channels-last is
// not a blocked layout (a kernel that takes it asks for it by name), so it
// has none: asking fails.
int64_t layout_block(Layout l);
Layout layout_from_block(int64_t block);

// The layout of input (or output) port i of the node, validated against the
// port's type t: a known name, rank 4; blocked: float32, channels a
// multiple of the block; channels-last: bfloat16, on an op whose
// LayoutCaps::channels_last says its kernels take it.
Layout port_layout(const NodeCtx& ctx, bool output, int i, const TensorType& t);

// Fails unless every port outside `may_block_in` / `may_block_out` is plain
// (weights, biases and masks are always plain).
void check_layout_ports(const NodeCtx& ctx, const std::vector<int>& may_block_in,
                        const std::vector<int>& may_block_out);

// The channel block oneDNN's f32 convolutions use on this CPU: 16 with
// AVX-512, else 8.
int64_t preferred_channel_block();

}  // namespace ts
