// What a device can do, declared once per device. The compiler pipeline
// picks its passes from these fields, and the session refuses what a
// device cannot run from them, with one message (check_supported), so no
// pass or runtime file tests which device it is.
#pragma once
#include <string>

#include "trainstep/options.h"

namespace ts {

struct Target {
  Device device = Device::Cpu;
  // The compiler's forms this device's kernels take.
  bool blocked_layouts = false;     // channel-blocked activations (plan_layouts)
  bool relu_fusion = false;         // relu into conv, relu's backward into its producer
  bool batch_norm_groups = false;   // pointwise groups into batch norm and its backward
  bool batched_transpose = false;   // transposes folded into batched (rank > 2) products
  bool merged_products = false;     // sums of products merged into one product
  bool composed_views = false;      // chains of views as one strided view
  // What its sessions run.
  bool grad_steps = false;          // grad_step / apply_step: accumulation, gradients by name
  bool data_parallel = false;       // several ranks joined by all-reduce nodes
  bool skip_nonfinite = false;      // NonFinite::Skip: new state kept until checked
  bool host_memory = false;         // its memory is the host's: state needs no copies
  bool bf16 = false;                // bfloat16 values (autocast steps)
};

// The target of device d. Needs no device present, nor a build with its
// backend (inspect shows a CUDA step's IR anywhere).
const Target& target_of(Device d);

// "cpu" or "cpu and cuda": the devices whose target has `field` set, for a
// refusal ("... runs on --device cpu only").
std::string devices_with(bool Target::*field);

}  // namespace ts
