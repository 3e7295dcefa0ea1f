// Compile-time evaluation of 0-d values with the ops' own kernels, shared
// by fold_constants and simplify so op semantics live in one place.
#pragma once
#include <optional>
#include <vector>

#include "ir/program.h"

namespace ts {

// Same dtype, shape and `wrapped` flag (TensorType::== ignores wrapped,
// but it changes promotion downstream).
bool same_type(const TensorType& a, const TensorType& b);

// The live node producing v, or nullptr (function input, dead producer).
const Node* producer_of(const Function& f, int v);

// Runs node n's kernel once on host tensors: in[k] is nullptr for an
// absent input, in_types carry the `wrapped` flags. Returns output 0.
HostTensor run_node(const Node& n, const std::vector<TensorType>& in_types,
                    const std::vector<const HostTensor*>& in, const TensorType& out);

// The value of v when a live trainstep.constant produces it.
std::optional<HostTensor> constant_tensor(const Function& f, int v);
// The same, read as a double (as stored, after the constant's dtype cast).
std::optional<double> constant_value(const Function& f, int v);

// Attributes of a trainstep.constant holding the 0-d tensor t.
json constant_attrs(const HostTensor& t, bool wrapped);

}  // namespace ts
