// Compile switches a session applies to the artifact's step functions
// (SessionOptions::compile). All on by default; turning one off is for
// debugging and measurement (`trainstep train --no-fusion`, ...).
#pragma once
#include <string>

namespace ts {

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

}  // namespace ts
