// Compile switches a session applies to the artifact's step functions
// (SessionOptions::compile). All on by default; turning one off is for
// debugging and measurement (`trainstep train --no-fusion`, ...).
#pragma once

namespace ts {

struct CompileOptions {
  bool cleanup = true;  // DCE, CSE, constant folding, algebraic simplification
  bool fusion = true;   // fused elementwise groups, oneDNN post-ops, blocked layouts
  bool inplace = true;  // new state written into the old state's buffers
};

}  // namespace ts
