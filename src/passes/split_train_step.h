// grad_step and apply_step derived from train_step, for an artifact
// exported without --grads. The exporter names each parameter's gradient
// value in train_step (Function::grads), and the step is cut there:
//  - apply_step is what the new parameters and optimizer state need, read
//    from the parameters, the optimizer state, the LR and the gradients
//    (clipping included);
//  - grad_step is what the loss, the new buffers and the gradients need.
// A node both sides need (a constant, say) goes into both. The signatures
// are those `export --grads` writes (docs/format.md), so what runs those
// (data-parallel training, gradient accumulation) runs these, and
// grad_step then apply_step computes what train_step does, op for op.
#pragma once
#include <string>

#include "ir/program.h"

namespace ts {

struct SplitSteps {
  Function grad, apply;
};

// Fails, naming `what` (the artifact), when train_step names no gradients
// (an artifact exported before the exporter did) or when its update reads
// anything else from the step (the batch, the loss, the RNG): an optimizer
// that needs the loss (LBFGS) cannot be split.
SplitSteps split_train_step(const Program& p, const std::string& what);

}  // namespace ts
