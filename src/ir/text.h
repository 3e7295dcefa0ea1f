// A text form of a Function, so passes are tested as IR text in -> IR text
// out. One statement per line:
//
//   func NAME(%x: float32[4, 3] {role=input}, %w: float32[3] {role=state, state=w}) {
//     %a = aten.mul.Tensor(%x, %w)
//     %c = trainstep.constant() {"dtype":"int64","value":1,"wrapped":true}
//     %g.0, _, %g.2 = aten.some_multi.default(%a, None) {"dim":1}
//     return %a {role=loss}, %g.0 {role=state, state=w}
//   }
//
// - Inputs are `%name: TYPE {role=R[, state=S][, index=I]}`; TYPE is
//   `dtype[d0, d1, ...]` (`float32[]` is 0-d). index is printed when non-zero.
// - A node is `OUTS = OP(ARGS) [ATTRS]`: OUTS are `%name` or `_` (an output
//   nobody uses), ARGS are `%name` or `None` (an absent optional input),
//   ATTRS is the node's attrs as one JSON object (printed compact, keys
//   sorted; omitted when empty) running to the end of the line.
// - `return` lists the outputs as `%name {role=...}`; their types are the
//   values' types.
// - Names are any run of characters other than whitespace and `,(){}[]:=`.
// - Blank lines and lines starting with `#` are ignored when parsing.
//
// Node output types are not written: parse_function infers them through the
// op registry (as verify_function does). Node names and `source` are not
// kept: a parsed node is named after its first output.
#pragma once
#include <string>

#include "ir/program.h"

namespace ts {

// Dead nodes (Node::dead) are skipped.
std::string print_function(const Function& f);
// Fails with ts::Error "ir text line N: ..." on a syntax or type error.
Function parse_function(const std::string& text);

}  // namespace ts
