// What a function's input or output port carries. The artifact spells roles
// as strings ("state", "rng_seed", ...); they are parsed once, here, when the
// program is read, and everything after compares the enum.
#pragma once
#include <string>

namespace ts {

enum class Role {
  State,       // a state tensor (param, buffer, optimizer state), by Port::state
  Grad,        // a parameter's gradient (grad_step output, apply_step input)
  Lr,          // the learning rate, 0-d float32 or float64
  RngSeed,     // the Philox stream's seed, 0-d int64
  RngOffset,   // the Philox stream's offset (the global step), 0-d int64
  Input,       // a model input, by Port::index
  Target,      // the loss target
  Loss,        // the step's loss, 0-d
  Output,      // a model output, by Port::index
  SampleLoss,  // eval_step's per-sample loss, [batch]
  BatchLoss,   // or its loss of the whole batch, 0-d (a loss the model returns)
};

// The artifact's spelling of `r`.
const char* role_name(Role r);
// False when `s` names no role (then *out is unchanged).
bool parse_role(const std::string& s, Role* out);
// "state, grad, lr, ...": for error messages.
std::string role_names();

}  // namespace ts
