// Session::open's compile stage: what the device can run is checked
// (check_supported), every size against the memory limit before anything is
// allocated, and the artifact's step functions are optimised for the
// device's target and their memory planned.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <optional>

#include "passes/shard_optimizer.h"
#include "passes/target.h"
#include "runtime/artifact.h"
#include "runtime/bound_step.h"
#include "runtime/memory_plan.h"
#include "trainstep/options.h"

namespace ts {

// "<what> runs on --device cpu only": the one wording of every refusal of a
// feature that a target lacks (`field`).
std::string runs_only_on(const std::string& what, bool Target::*field);

// Throws ts::Error, naming `artifact`, for an option target t cannot run.
void check_supported(const SessionOptions& o, const Target& t, const std::string& artifact);

struct CompiledStep {
  StepKind kind;
  std::unique_ptr<Function> fn;
  MemoryPlan plan;
};

struct CompiledSteps {
  std::vector<CompiledStep> steps;  // in kStepKinds order, those the artifact has
  DType lr_dtype = DType::F32;      // the steps' LR input (float32, or float64)
  const Function* grad_step = nullptr;  // among steps, or null
  // SessionOptions::shard_optimizer over several ranks: who updates and
  // holds what. The steps are this rank's (they read and write only the
  // optimizer state it holds).
  std::optional<ShardPlan> shard;
};

// The step functions of `a` as target t runs them. With several ranks the
// train step is grad_step + all-reduce + apply_step (or, sharding the
// optimizer, + reduce-scatter + this rank's update + all-gather). Fails naming the
// artifact, the function and the value when something does not fit
// o.max_memory (or the machine's memory), with the state's size counted in.
CompiledSteps compile_steps(const Artifact& a, const SessionOptions& o, const Target& t);

}  // namespace ts
