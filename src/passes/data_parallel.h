// The data-parallel training step: an artifact's grad_step and apply_step
// joined into one function with an averaging all-reduce of the gradients
// between them. The gradients are found by their role in the two
// signatures (grad_step's Grad outputs, apply_step's Grad inputs), so no
// user code changes and clipping in apply_step sees the averaged gradient,
// as with PyTorch DDP.
//
// Buckets follow DDP: gradients in reverse parameter order (about the order
// the backward makes them), one dtype per bucket, a bucket closed once it
// holds first_bytes (the first) or cap_bytes (the rest). Each bucket is a
// trainstep.all_reduce_start placed right after the last of its gradients
// is made, and a trainstep.all_reduce_wait before the optimizer update, so
// the reduction runs while the rest of the backward does (ops/all_reduce.cpp).
//
// The result has train_step's signature (state, lr, RNG, batch in; loss and
// new state out) and is verified; optimize() runs on it as on any step.
#pragma once
#include <string>
#include <vector>

#include "ir/program.h"
#include "passes/shard_optimizer.h"
#include "trainstep/collective.h"

namespace ts {

// One bucket: the gradients it packs, by parameter name, in bucket order.
struct GradBucket {
  std::vector<std::string> params;
  size_t bytes = 0;
};

// The buckets for grad_step's gradients (exposed for tests and `inspect`).
std::vector<GradBucket> grad_buckets(const Function& grad, const BucketOptions& o);

// `what` names the artifact in errors. With a shard plan, the step is rank
// `rank`'s: its update is shard_apply's, and the gradients are
// reduce-scattered to the ranks that update them (all-reduced where
// plan->reads_all_grads).
Function data_parallel_step(const Function& grad, const Function& apply, const BucketOptions& o,
                            const std::string& what, const ShardPlan* shard = nullptr,
                            int rank = 0);

}  // namespace ts
