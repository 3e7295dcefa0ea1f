// Builds the op table once. Each op file under src/ops/ exposes one
// register_*_ops function; this is the only list of them.
#include "ops/op.h"

namespace ts {

void register_conv_ops(OpRegistry&);
void register_pool_ops(OpRegistry&);
void register_upsample_ops(OpRegistry&);
void register_avg_pool_ops(OpRegistry&);
void register_batch_norm_ops(OpRegistry&);
void register_batch_norm_group_ops(OpRegistry&);
void register_matmul_ops(OpRegistry&);
void register_elementwise_ops(OpRegistry&);
void register_reduce_ops(OpRegistry&);
void register_norm_ops(OpRegistry&);
void register_softmax_ops(OpRegistry&);
void register_index_ops(OpRegistry&);
void register_shape_ops(OpRegistry&);
void register_creation_ops(OpRegistry&);
void register_random_ops(OpRegistry&);
void register_fused_ops(OpRegistry&);
void register_pad_ops(OpRegistry&);
void register_repeat_ops(OpRegistry&);
void register_collective_ops(OpRegistry&);

const OpRegistry& OpRegistry::get() {
  static const OpRegistry reg = [] {
    OpRegistry r;
    register_conv_ops(r);
    register_pool_ops(r);
    register_upsample_ops(r);
    register_avg_pool_ops(r);
    register_batch_norm_ops(r);
    register_batch_norm_group_ops(r);
    register_matmul_ops(r);
    register_elementwise_ops(r);
    register_reduce_ops(r);
    register_norm_ops(r);
    register_softmax_ops(r);
    register_index_ops(r);
    register_shape_ops(r);
    register_creation_ops(r);
    register_random_ops(r);
    register_fused_ops(r);
    register_pad_ops(r);
    register_repeat_ops(r);
    register_collective_ops(r);
    return r;
  }();
  return reg;
}

}  // namespace ts
