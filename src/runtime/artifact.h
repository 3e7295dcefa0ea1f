// A loaded .tstep artifact: the verified program plus its tensors (initial
// state under "state/<name>", golden trace under "golden/…").
#pragma once
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "ir/program.h"

namespace ts {

struct Artifact {
  std::string path;
  Program program;
  SafeTensors tensors;

  // The tensor `name`, or an error naming the artifact and the tensor.
  const HostTensor& tensor(const std::string& name) const;

  // Golden step k's batch, one view per train_step input and target port
  // by index: golden/step<k>/input<i> and golden/step<k>/target<i> (the
  // first target is plain "target", as in version 1; docs/format.md).
  struct Batch {
    std::vector<Tensor> inputs, targets;
  };
  Batch golden_batch(int64_t k) const;
};

// load → verify: reads the file, checks the container, the format version,
// the program (structure, ops, types) and the initial state.
Artifact load_artifact(const std::string& path);
// The same checks on a file already read (and its checksums checked).
Artifact load_artifact(const std::string& path, SafeTensors tensors);

}  // namespace ts
