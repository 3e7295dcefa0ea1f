// The IR: a program is a set of functions over SSA values, read from the
// artifact's program JSON (docs/format.md). parse_program checks structure;
// verify_function resolves every op in the registry, re-infers every value's
// type and checks it against the type the exporter recorded.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/role.h"
#include "ops/op.h"
#include "trainstep/tensor.h"

namespace ts {

struct Node {
  std::string name;
  std::string op;
  const OpDef* def = nullptr;   // set by verify_function
  json attrs;
  std::vector<int> inputs;      // value ids; -1 = absent optional input
  std::vector<int> outputs;     // value ids; -1 = output nobody uses
  std::vector<TensorType> declared;  // output types recorded by the exporter
  std::string source;           // where PyTorch says the node came from, if known
  bool dead = false;            // marked by a pass; dropped by compact()
};

// n's OpDef, looked up by name where a pass has just set n.op (and cleared
// n.def); an op the registry lacks gets an OpDef with no facts.
const OpDef& def_of(const Node& n);

// One input or output of a function's signature.
struct Port {
  std::string name;   // value name (inputs); for outputs the model output's path ("output/mu"), or ""
  Role role = Role::Input;
  std::string state;  // state tensor name, for roles state and grad
  int index = 0;      // model input/output index, for role input/output
  int batch_dim = 0;  // the dim holding the batch's samples (input, target, output)
  TensorType type;
  int value = -1;     // value id
};

struct Function {
  std::string name;
  std::vector<Port> inputs, outputs;
  // train_step as exported: each trained parameter's gradient (role Grad),
  // a value of the step rather than a result. split_train_step cuts there;
  // compact() drops them (a pass may have renumbered or removed the values).
  std::vector<Port> grads;
  std::vector<Node> nodes;  // in a valid execution order
  std::vector<std::string> value_names;
  std::vector<TensorType> value_types;
  std::vector<int> producer;  // value id -> node index, -1 for function inputs

  int find_input(Role role, const std::string& state = "") const;  // -1 if none
  int find_output(Role role, const std::string& state = "") const;
  // The ports of `role`, by their model index (inputs, outputs).
  std::vector<int> inputs_of(Role role) const;
  std::vector<int> outputs_of(Role role) const;
};

struct StateSpec {
  std::string name;
  std::string kind;  // param | frozen | buffer | optim
  TensorType type;
};

struct Program {
  int version = 0;
  std::string name;
  int64_t batch_size = 0;
  // What captured it (informational; empty in artifacts that predate them).
  std::string torch_version, python_version;
  json optimizer;
  json golden;
  std::vector<StateSpec> state;
  // Tied weights: a second state_dict name -> the state tensor it shares.
  std::map<std::string, std::string> aliases;
  std::map<std::string, Function> functions;

  const Function& function(const std::string& name) const;  // fails if absent
  const StateSpec* find_state(const std::string& name) const;
};

constexpr int kFormatVersion = 1;

// `what` names the source (the artifact path) in every error message.
Program parse_program(const json& j, const std::string& what);
// One FUNCTION object (docs/format.md) on its own, structure only: callers
// that run a lone function (`trainstep run-program`) verify it themselves.
Function parse_function_json(const json& j, const std::string& name, const std::string& what);
void verify_function(Function& f, const std::string& what);

// The limits on a shape (rank at most 16, at most 2^40 elements), checked
// when a program or IR text is read and on every type an op infers, so
// nothing sized from a type overflows. Returns why `s` is over them, or "".
std::string shape_limit_error(const Shape& s);

// The NodeCtx an op sees for node n of f (input types from f's values;
// absent optional inputs marked). n must outlive it (attrs are referenced).
NodeCtx node_ctx(const Function& f, const Node& n);

// One-line text form of a node, for dumps and pass tests.
std::string node_str(const Function& f, const Node& n);

}  // namespace ts
