// Fuses aten.convolution.default -> aten.relu.default into one
// trainstep.conv2d_relu node (oneDNN eltwise_relu post-op) when relu is the
// convolution's only reader: the pre-relu value is then never materialised,
// so nothing else (e.g. a backward) may need it.
#pragma once
#include "ir/program.h"

namespace ts {

void fuse_conv_relu(Function& f);

}  // namespace ts
