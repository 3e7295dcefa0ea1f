// Fuses a relu into the node whose output 0 it reads when relu is that
// output's only reader: aten.convolution.default -> trainstep.conv2d_relu
// (oneDNN eltwise_relu post-op), aten.native_batch_norm.default ->
// trainstep.batch_norm_relu (relu in the output loop; the saves stay). The
// pre-relu value is then never materialised, so nothing else (e.g. a
// backward) may need it. The ops say their part (FuseRole Conv, BatchNorm,
// Relu) and their fused form (relu_fused).
#pragma once
#include "ir/program.h"

namespace ts {

void fuse_conv_relu(Function& f);

}  // namespace ts
