// Inspector::compile and what a CompiledFunction shows: IR text, the graph
// `inspect --graph` draws and the memory plan `inspect --memory` draws.
#include <cstdio>

#include "ir/text.h"
#include "passes/pipeline.h"
#include "runtime/artifact.h"
#include "runtime/memory_plan.h"
#include "trainstep/inspect.h"

namespace ts {

namespace {

Fusion fusion_of(const Node& n) {
  if (n.op == "trainstep.fused_elementwise") return Fusion::Elementwise;
  if (n.op == "trainstep.conv2d_relu") return Fusion::PostOp;
  if (n.op == "trainstep.conv_backward_relu" || n.op == "trainstep.max_pool2d_code" ||
      n.op == "trainstep.max_pool2d_code_backward" || n.op == "trainstep.matmul" || n.op == "trainstep.addmm" ||
      n.op == "trainstep.batch_norm_relu")
    return Fusion::Folded;
  return Fusion::None;
}

// The members of a fused group as passes/fuse_elementwise writes them (the
// format is ops/fused_elementwise.cpp's): their args are the node's inputs
// or earlier members, so the group's data flow can be drawn edge by edge.
std::vector<GraphMember> members_of(const Node& n) {
  std::vector<GraphMember> ms;
  try {
    for (const json& m : n.attrs.at("members")) {
      GraphMember x;
      x.op = m.at("op").get<std::string>();
      x.name = m.value("name", std::to_string(ms.size()));
      if (x.op == "trainstep.constant" && m.at("args").empty() && m.contains("attrs") &&
          m["attrs"].contains("value")) {
        const json& v = m["attrs"]["value"];
        char buf[32];
        if (v.is_number()) std::snprintf(buf, sizeof buf, "%g", v.get<double>());
        x.constant_text = v.is_number() ? buf : v.dump();
        x.constant = true;
      }
      for (const json& a : m.at("args")) {
        const bool in = a.at(0).get<std::string>() == "in";
        const int i = a.at(1).get<int>();
        if (i < 0 || i >= static_cast<int>(in ? n.inputs.size() : ms.size()))
          fail("graph: " + n.name + "/" + x.name + ": bad member arg " + a.dump());
        x.args.push_back({in, i});
      }
      ms.push_back(std::move(x));
    }
    const json& outs = n.attrs.at("outputs");
    for (size_t k = 0; k < outs.size(); ++k) {
      const int j = outs[k].get<int>();
      if (j < 0 || j >= static_cast<int>(ms.size()) || k >= n.outputs.size())
        fail("graph: " + n.name + ": bad output member " + std::to_string(j));
      ms[j].values.push_back(n.outputs[k]);
    }
  } catch (const json::exception& e) {
    fail("graph: " + n.name + ": malformed members/outputs attribute: " + e.what());
  }
  return ms;
}

}  // namespace

CompiledFunction Inspector::compile(const std::string& function, const SessionOptions& o) const {
  auto f = std::make_shared<Function>(artifact_->program.function(function));
  optimize(*f, o.compile, o.device);
  return CompiledFunction(std::move(f), o.compile.inplace);
}

CompiledFunction::CompiledFunction(std::shared_ptr<const Function> f, bool inplace)
    : f_(std::move(f)), inplace_(inplace) {}

const std::string& CompiledFunction::name() const { return f_->name; }

std::string CompiledFunction::ir() const { return print_function(*f_); }

FunctionGraph CompiledFunction::graph() const {
  FunctionGraph g;
  g.name = f_->name;
  g.value_names = f_->value_names;
  for (const auto& t : f_->value_types) g.value_types.push_back(t.str());
  for (const Node& n : f_->nodes) {
    GraphNode d{n.name, n.op, n.source, n.inputs, n.outputs, fusion_of(n), {}};
    if (d.fusion == Fusion::Elementwise) d.members = members_of(n);
    g.nodes.push_back(std::move(d));
  }
  return g;
}

MemoryLayout CompiledFunction::memory_plan() const {
  const Function& f = *f_;
  const MemoryPlan p = plan_memory(f, inplace_, true);
  MemoryLayout m;
  m.function = f.name;
  m.nodes = static_cast<int>(f.nodes.size());
  m.arena_bytes = p.arena_bytes;
  m.naive_bytes = p.naive_bytes;
  const size_t nv = p.root.size();
  std::vector<std::vector<std::string>> sharers(nv);
  for (size_t v = 0; v < nv; ++v)
    if (p.live[v] && p.root[v] != static_cast<int>(v)) sharers[p.root[v]].push_back(f.value_names[v]);
  for (size_t v = 0; v < nv; ++v) {
    const int i = static_cast<int>(v);
    if (p.root[v] != i || !p.has_slot(i)) continue;
    m.buffers.push_back({i, f.value_names[v], p.offset[v], p.size[v], p.first[v], p.last[v],
                         std::move(sharers[v])});
  }
  return m;
}

}  // namespace ts
