// Folds the pointwise groups around a float32 batch norm's output y into
// the batch norm and its backward, after fuse_elementwise has made the
// groups: the activation's group (hardswish, SiLU, GELU... reading y) runs
// on each tile of y as the forward makes it (trainstep.batch_norm_epilogue),
// and each backward group that reads y to make the gradient batch norm's
// backward reads becomes that backward's prologue, with y recomputed from x
// (trainstep.batch_norm_backward_prologue). y and the gradient are then
// never written: per batch-norm layer, 13 passes over the activations
// become 8. It folds only when every reader of y is one of those, so y
// disappears. The ops say their part (FuseRole BatchNorm,
// BatchNormBackward, ElementwiseGroup) and their fused form (group_fused).
#pragma once
#include "ir/program.h"

namespace ts {

void fuse_batch_norm_groups(Function& f);

}  // namespace ts
