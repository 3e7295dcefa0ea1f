// Small tools for passes that rewrite a Function in place: mark nodes dead,
// redirect uses, add values, then compact() renumbers everything and
// re-verifies types. Passes stay short and their results stay valid IR.
#pragma once
#include <string>
#include <vector>

#include "ir/program.h"

namespace ts {

// For each value, the indices of the nodes that read it (in order).
std::vector<std::vector<int>> consumers(const Function& f);
// Is value v a function output?
std::vector<bool> output_values(const Function& f);

// Every read of value `from` (node inputs and function outputs) reads `to`.
void replace_uses(Function& f, int from, int to);

// A new value (for a node a pass creates). Its producer is set by compact().
int add_value(Function& f, const std::string& name, const TensorType& t);

// The values `roots` are computed from, roots included (walking back
// through producers), by value id.
std::vector<bool> values_reaching(const Function& f, const std::vector<int>& roots);

// Appends the nodes of `src` that `need` marks to `dst`, in src's order:
// their inputs read through `map` (src value id -> dst id), each output a
// new value of dst, recorded in `map`.
void copy_nodes(const Function& src, const std::vector<bool>& need, Function& dst,
                std::vector<int>& map);

// Drops dead nodes and values nobody defines or reads any more, renumbers
// value ids, recomputes producers, and re-verifies (types must still hold).
void compact(Function& f);

}  // namespace ts
