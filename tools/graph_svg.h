// `inspect --graph`: a step function as an SVG picture, laid out by Graphviz
// (dot). One Graphviz node per IR node (<g class="node"> with the node's name
// in <title>), labelled with its op and output types; a fused elementwise
// group is instead a cluster (<g class="cluster fused-elementwise">, titled
// cluster_NODE) holding one node per member op (class fused-member, titled
// NODE/MEMBER). An edge per producer and reader of a value, members included
// (function inputs and outputs are not drawn). Nodes a fusion pass made are
// filled by kind, with a legend in the graph's label.
#pragma once
#include <string>

#include "trainstep/inspect.h"

namespace tscli {

// The SVG document; a ts::Error if Graphviz fails (its message included).
std::string graph_svg(const ts::FunctionGraph& f);

}  // namespace tscli
