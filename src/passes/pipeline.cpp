#include "passes/pipeline.h"

#include "passes/fold_transpose.h"
#include "passes/fuse_conv_relu.h"

namespace ts {

void optimize(Function& f, const CompileOptions& o) {
  if (o.fusion) {
    fold_transpose(f);
    fuse_conv_relu(f);
  }
}

}  // namespace ts
