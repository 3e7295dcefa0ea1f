// The tensor side of the checkpoint format (docs/format.md, "Checkpoints"):
// which tensors a checkpoint holds for a program, and the checks a file
// passes before a session takes any of it. The metadata schema is
// trainstep/checkpoint.h.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "ir/program.h"
#include "trainstep/checkpoint.h"

namespace ts {

// Every state tensor of `p` under its state name, plus each tied weight's
// second state_dict name (so model.load_state_dict takes it), written
// atomically. `state` holds each one by name.
void write_checkpoint(const std::string& path, const std::map<std::string, std::string>& metadata,
                      const Program& p, const std::map<std::string, const Tensor*>& state);

// Fails naming `path` unless `ck` holds exactly the program's state tensors
// (and its aliases), each of the program's type.
void check_checkpoint_fits(const SafeTensors& ck, const CheckpointMeta& m, const Program& p,
                           const std::string& path);

}  // namespace ts
