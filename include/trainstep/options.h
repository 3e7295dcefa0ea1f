// What a Session is opened with (SessionOptions), and its parts: the
// compile switches, the device, the non-finite policy.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "trainstep/collective.h"

namespace ts {

// Compile switches a session applies to the artifact's step functions
// (SessionOptions::compile). All on by default; turning one off is for
// debugging and measurement (`trainstep train --no-fusion`, ...).
struct CompileOptions {
  bool cleanup = true;  // DCE, CSE, constant folding, algebraic simplification
  bool fusion = true;   // fused elementwise groups, oneDNN post-ops, blocked layouts
  bool inplace = true;  // new state written into the old state's buffers
};

// Where a session's steps run. Cuda needs a build with the CUDA backend
// (cmake -DTRAINSTEP_WITH_CUDA=ON, the default where nvcc is found) and a
// GPU; the state then lives on the GPU and each step is one CUDA graph.
enum class Device { Cpu, Cuda };

// "cpu" / "cuda"; anything else throws ts::Error listing the two.
Device parse_device(const std::string& name);
const char* device_name(Device d);

// What a training step does when the loss or a new state tensor is NaN or
// inf. Checked after every train_step and apply_grads: the loss, then each
// new state tensor (params, buffers, optimizer state) in the step's output
// order. train_step does not output gradients (a non-finite gradient shows
// up in the optimizer state or the parameters it updates); grad_step does,
// and checks them too.
enum class NonFinite {
  Ignore,  // no check
  Stop,    // throw ts::Error naming the step and the first non-finite tensor
  // Keep the state from before the step (as AMP's GradScaler skips an
  // update), count it in skipped_steps(), and go on; the step counter still
  // advances (the batch is consumed). Cost: new state cannot be written in
  // place over the old (no donation), so the step's arena grows by the
  // state's size and every step copies the new state back (a memcpy of the
  // state), as with --no-inplace.
  Skip,
};

struct SessionOptions {
  int threads = 0;  // 0: the calling thread's OpenMP default
  Device device = Device::Cpu;  // see trainstep/options.h
  CompileOptions compile;
  // Bound on the memory the session allocates for state and the steps'
  // arenas, in bytes (0: the machine's physical memory). Checked before
  // anything is allocated; an error names the size needed.
  size_t max_memory = 0;
  NonFinite on_nonfinite = NonFinite::Stop;
  // Data-parallel training over a group of ranks (one Session per rank,
  // each fed its own shard of the data). With more than one rank,
  // train_step is grad_step and apply_step (the artifact's, or cut from
  // its train_step) joined by an averaging all-reduce of the gradients,
  // apply_grads averages the accumulated gradients over the ranks too, and
  // the RNG draws (dropout) differ by rank. The state stays replicated:
  // every rank applies the same averaged update. Null: one process.
  std::shared_ptr<Collective> collective;
  // Compile grad_step and apply_step (Session::grad_step, apply_grads:
  // gradient accumulation) for an artifact exported without --grads, cut
  // from train_step at its gradients. An artifact with them has them anyway.
  bool grad_steps = false;
  BucketOptions buckets;  // how train_step groups the gradients it reduces
  // Data-parallel only (ZeRO stage 1): each rank updates a share of the
  // parameters and holds only their optimizer state; gradients are
  // reduce-scattered to the ranks that update them and the new parameters
  // all-gathered (docs/distributed.md). A sharded session's
  // save_checkpoint must be called on every rank. With one rank (or no
  // collective) there is nothing to share, and it changes nothing.
  bool shard_optimizer = false;
};

}  // namespace ts
