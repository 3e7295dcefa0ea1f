#include "passes/pipeline.h"

#include "ir/rewrite.h"
#include "ops/dnnl_util.h"
#include "ops/layout.h"
#include "passes/cleanup.h"
#include "passes/compose_views.h"
#include "passes/fold_transpose.h"
#include "passes/fuse_batch_norm_groups.h"
#include "passes/fuse_conv_relu.h"
#include "passes/fuse_elementwise.h"
#include "passes/fuse_relu_backward.h"
#include "passes/merge_products.h"
#include "passes/plan_layouts.h"
#include "passes/schedule.h"

namespace ts {

namespace {

// What the cleanup passes change: live nodes' ops, inputs and outputs.
std::string fingerprint(const Function& f) {
  std::string s;
  for (const Node& n : f.nodes) {
    if (n.dead) continue;
    s += n.op + '(';
    for (int v : n.inputs) s += std::to_string(v) + ',';
    for (int v : n.outputs) s += std::to_string(v) + ';';
  }
  for (const Port& p : f.outputs) s += std::to_string(p.value) + ',';
  return s;
}

void cleanup(Function& f) {
  // Each round can expose work for the others (a fold makes a 1 that
  // simplify removes, ...); a handful of rounds reaches the fixed point.
  std::string before = fingerprint(f);
  for (int round = 0; round < 8; ++round) {
    simplify(f);
    fold_constants(f);
    cse(f);
    dce(f);
    std::string after = fingerprint(f);
    if (after == before) break;
    before = std::move(after);
  }
  compact(f);
}

}  // namespace

void optimize(Function& f, const CompileOptions& o, const Target& t) {
  if (o.cleanup) cleanup(f);
  // Fusion after cleanup, so groups see folded constants and no no-op
  // arithmetic. Transposes fold into matmuls and relus into convs before
  // the elementwise groups form, so those relus are not grouped away.
  if (o.fusion) {
    fold_transpose(f, t.batched_transpose);
    if (t.merged_products) merge_summed_products(f);
    // After fold_transpose, which reads a transpose feeding a product in place.
    if (t.composed_views) compose_views(f);
    if (t.relu_fusion) {
      fuse_conv_relu(f);
      fuse_relu_backward(f);
    }
    fuse_elementwise(f);
    // The groups exist now; before plan_layouts, which lays the fused
    // nodes out as it lays out batch norm.
    if (t.batch_norm_groups) fuse_batch_norm_groups(f);
    // Last: it needs the final producers and readers of each activation.
    if (t.blocked_layouts) plan_layouts(f, preferred_channel_block(), t.bf16 && dnnl_bf16_available());
  }
  // In-place planning happens in the executor's memory plan; this order
  // lets it free each gradient as soon as its update has run.
  if (o.inplace) schedule_updates_early(f);
}

void optimize(Function& f, const CompileOptions& o, Device d) { optimize(f, o, target_of(d)); }

}  // namespace ts
