// Look inside an artifact, public: what it holds (model, optimizer, state,
// each function's signature and op histogram) and a step function as the
// compiler leaves it (IR text, its graph of nodes, its memory plan). It is
// what `trainstep inspect` prints and draws. Nothing is compiled to kernels
// and no session is opened, so a function can be looked at for a device
// this machine lacks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainstep/session.h"

namespace ts {

struct Function;

// The optimizer as the exporter writes it: one entry per param group.
struct OptimizerGroup {
  size_t params = 0, updated = 0;
  std::string lr_scale;  // JSON text
  std::string options;   // JSON text of the group's options, lr left out
};
struct OptimizerSummary {
  std::string json;  // the optimizer's JSON as stored
  // False when it is not in the exporter's shape (older or hand-made
  // artifacts): then only `json` is set.
  bool structured = false;
  std::string type, lr;  // lr as JSON text
  std::vector<OptimizerGroup> groups;
};

// A port `train --data` feeds from a data field of its name.
struct DataPort {
  std::string name, type;  // type as "f32[64, 1, 28, 28]"
  int batch_dim = 0;
};

struct FunctionSummary {
  std::string name;
  size_t inputs = 0, outputs = 0, nodes = 0;
  std::map<std::string, int> input_roles, output_roles;  // ports per role name
  std::vector<DataPort> data_inputs, data_targets;
  std::vector<std::pair<std::string, int>> ops;  // op and node count, most used first
};

struct ArtifactSummary {
  std::string model;
  int format_version = 0;
  int64_t batch_size = 0;
  std::string torch_version, python_version;  // "" when not recorded
  bool checksummed = false;                   // the file carries checksums
  OptimizerSummary optimizer;
  std::vector<std::pair<std::string, std::string>> tied;  // alias, the name it is
  size_t state_tensors = 0;
  std::map<std::string, int64_t> state_numel, state_bytes;  // by kind: param, frozen, buffer, optim
  std::vector<FunctionSummary> functions;                   // by name
};

// How a node came out of the fusion passes.
enum class Fusion {
  None,
  Elementwise,  // trainstep.fused_elementwise: a group run as one loop
  PostOp,       // trainstep.conv2d_relu: relu as a oneDNN post-op
  Folded,       // relu (into batch norm), relu backward or transposes folded into the kernel
};

// A member op of a fused elementwise group.
struct GraphMember {
  std::string name, op;
  std::vector<std::pair<bool, int>> args;  // {true, k}: the node's input k; {false, j}: member j
  std::vector<int> values;                 // the node's outputs it computes
  bool constant = false;                   // an immediate folded in by the pass ...
  std::string constant_text;               // ... its value ("%g" for a number, else JSON)
};

struct GraphNode {
  std::string name, op;
  std::string source;               // where the model made it ("" if unknown)
  std::vector<int> inputs, outputs;  // value ids (-1: none)
  Fusion fusion = Fusion::None;
  std::vector<GraphMember> members;  // Fusion::Elementwise only
};

// A function's nodes in schedule order, values by id.
struct FunctionGraph {
  std::string name;
  std::vector<std::string> value_names, value_types;
  std::vector<GraphNode> nodes;
};

// One arena buffer of a memory plan: a value with memory of its own.
struct PlannedBuffer {
  int value = 0;
  std::string name;
  size_t offset = 0, bytes = 0;
  int first = 0, last = 0;  // producing node and last reader (-1: an input; nodes: to the end)
  std::vector<std::string> shared_with;  // values living in its bytes (views, in-place results)
};

struct MemoryLayout {
  std::string function;
  int nodes = 0;
  size_t arena_bytes = 0, naive_bytes = 0;  // planned, and one slot per value without reuse
  std::vector<PlannedBuffer> buffers;       // by value id
};

// A step function after the compiler's passes.
class CompiledFunction {
 public:
  CompiledFunction(std::shared_ptr<const Function> f, bool inplace);
  const std::string& name() const;
  std::string ir() const;  // IR text, as tests/cpp/test_passes.cpp reads it
  FunctionGraph graph() const;
  // As a session plans it by default (new state donated to the old buffers).
  MemoryLayout memory_plan() const;

 private:
  std::shared_ptr<const Function> f_;
  bool inplace_;
};

// An artifact loaded and verified (not compiled).
class Inspector {
 public:
  explicit Inspector(const std::string& artifact_path);
  ~Inspector();
  ArtifactSummary summary() const;
  bool checksummed() const;
  // `function` (train_step, eval_step, ...) as a session with `o` would
  // compile it: o.compile's passes for o.device.
  CompiledFunction compile(const std::string& function, const SessionOptions& o) const;

 private:
  std::shared_ptr<const Artifact> artifact_;
};

// The ops this build runs, in the registry's order (`trainstep ops`): every
// op on the CPU; on Device::Cuda the ones with CUDA kernels (none in a
// build without the CUDA backend).
struct OpInfo {
  std::string name, doc;
  bool bfloat16 = false;  // takes bfloat16 tensors (natively or through float32)
};
std::vector<OpInfo> supported_ops(Device d = Device::Cpu);

// The program format version this build reads and writes (docs/format.md).
int program_format_version();

}  // namespace ts
