#include "graph_svg.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <cstdio>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "svg.h"
#include "trainstep/error.h"

namespace tscli {

namespace {

struct Kind {
  const char* colour;
  const char* legend;
  const char* css;  // extra class on the node's (or cluster's) <g>
};

Kind kind(ts::Fusion k) {
  switch (k) {
    case ts::Fusion::Elementwise: return {"#fdd49e", "fused elementwise group", "fused-elementwise"};
    case ts::Fusion::PostOp: return {"#c6dbef", "oneDNN post-op (conv + relu)", "fused-post-op"};
    case ts::Fusion::Folded:
      return {"#c7e9c0", "folded into the kernel (relu, relu backward, transpose)", "fused-folded"};
    case ts::Fusion::None: break;
  }
  return {"#ffffff", "other op", "plain"};
}

// "aten.mul.Tensor" -> "mul": member lists stay short.
std::string short_op(std::string op) {
  for (const char* p : {"aten.", "trainstep."})
    if (op.rfind(p, 0) == 0) op = op.substr(std::string(p).size());
  const auto dot = op.find('.');
  return dot == std::string::npos ? op : op.substr(0, dot);
}

// Graphviz's plain labels read backslash escapes; "\n" ends a centred line.
std::string label_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

std::string types_label(const ts::FunctionGraph& f, const std::vector<int>& values) {
  std::string s;
  int shown = 0;
  for (int v : values) {
    if (shown == 3) {
      s += "\\n+" + std::to_string(values.size() - 3) + " more";
      break;
    }
    s += "\\n" + (v < 0 ? std::string("_") : label_text(f.value_types[v]));
    ++shown;
  }
  return s;
}

// A member of a fused group with its label: an immediate constant reads
// better as its value, an op as its short name.
struct Member : ts::GraphMember {
  std::string label;
};

std::vector<Member> members(const ts::GraphNode& n) {
  std::vector<Member> ms;
  for (const ts::GraphMember& m : n.members)
    ms.push_back({m, label_text(m.constant ? m.constant_text : short_op(m.op))});
  return ms;
}

void set(void* obj, const char* key, const std::string& value) {
  agsafeset(obj, const_cast<char*>(key), const_cast<char*>(value.c_str()), const_cast<char*>(""));
}

void set_default(Agraph_t* g, int kind, const char* key, const char* value) {
  agattr(g, kind, const_cast<char*>(key), const_cast<char*>(value));
}

// Graphviz reports through a callback; keep its words for our error.
std::string g_errors;
int collect_error(char* msg) {
  g_errors += msg;
  return 0;
}

std::string legend_html(const ts::FunctionGraph& f) {
  int counts[4] = {0, 0, 0, 0};
  for (const auto& n : f.nodes) counts[static_cast<int>(n.fusion)]++;
  // One row a kind, so the legend stays narrow however wide the graph is.
  std::string h = "<table border=\"0\" cellborder=\"1\" cellspacing=\"2\" cellpadding=\"3\">"
                  "<tr><td border=\"0\"><b>" +
                  xml_escape(f.name + " after the compiler's passes: " +
                             std::to_string(f.nodes.size()) + " nodes") +
                  "</b></td></tr>";
  for (ts::Fusion k : {ts::Fusion::Elementwise, ts::Fusion::PostOp, ts::Fusion::Folded, ts::Fusion::None}) {
    const Kind d = kind(k);
    h += std::string("<tr><td bgcolor=\"") + d.colour + "\">" + xml_escape(d.legend) + ": " +
         std::to_string(counts[static_cast<int>(k)]) + "</td></tr>";
  }
  return h + "</table>";
}

}  // namespace

std::string graph_svg(const ts::FunctionGraph& f) {
  g_errors.clear();
  agseterrf(collect_error);
  agseterr(AGERR);  // warnings (e.g. about fonts) are not failures
  std::unique_ptr<GVC_t, int (*)(GVC_t*)> gvc(gvContext(), gvFreeContext);
  if (!gvc) ts::fail("graphviz: cannot start a context");
  Agraph_t* g = agopen(const_cast<char*>(f.name.c_str()), Agdirected, nullptr);
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> own(g, agclose);
  set_default(g, AGRAPH, "rankdir", "TB");
  set_default(g, AGRAPH, "labelloc", "t");
  set_default(g, AGRAPH, "labeljust", "l");
  set_default(g, AGRAPH, "fontname", "Helvetica");
  set_default(g, AGNODE, "shape", "box");
  set_default(g, AGNODE, "style", "rounded,filled");
  set_default(g, AGNODE, "fontname", "Helvetica");
  set_default(g, AGNODE, "fontsize", "10");
  set_default(g, AGNODE, "fillcolor", "#ffffff");
  set_default(g, AGEDGE, "arrowsize", "0.5");
  set_default(g, AGEDGE, "color", "#777777");
  char* legend = agstrdup_html(g, const_cast<char*>(legend_html(f).c_str()));
  agsafeset(g, const_cast<char*>("label"), legend, const_cast<char*>(""));
  agstrfree(g, legend);

  // A plain node is one box; a fused group is a cluster of its members.
  struct Drawn {
    Agnode_t* box = nullptr;
    std::vector<Member> ms;
    std::vector<Agnode_t*> mv;
  };
  std::vector<Drawn> drawn(f.nodes.size());
  std::vector<Agnode_t*> producer(f.value_names.size(), nullptr);
  auto add_node = [&](Agraph_t* sub, const std::string& name) {
    if (agnode(g, const_cast<char*>(name.c_str()), 0))
      ts::fail("graph: two nodes named " + name);
    return agnode(sub, const_cast<char*>(name.c_str()), 1);
  };
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const ts::GraphNode& n = f.nodes[i];
    const Kind k = kind(n.fusion);
    Drawn& d = drawn[i];
    if (n.fusion == ts::Fusion::Elementwise) {
      d.ms = members(n);
      Agraph_t* c = agsubg(g, const_cast<char*>(("cluster_" + n.name).c_str()), 1);
      set(c, "label", "fused elementwise: " + std::to_string(d.ms.size()) + " ops");
      set(c, "style", "filled,rounded");
      set(c, "fillcolor", k.colour);
      set(c, "color", "#d9a066");
      set(c, "fontsize", "10");
      set(c, "class", k.css);  // with Graphviz's own: class="cluster fused-elementwise"
      for (const Member& m : d.ms) {
        // Named as the fused op names a member in its errors.
        Agnode_t* v = add_node(c, n.name + "/" + m.name);
        set(v, "label", m.label + types_label(f, m.values));
        set(v, "class", "fused-member");
        set(v, "fillcolor", "#fff7ec");
        set(v, "fontsize", "9");
        set(v, "tooltip", n.name + "/" + m.name + ": " + m.op);
        if (m.constant) set(v, "shape", "ellipse");
        d.mv.push_back(v);
        for (int o : m.values)
          if (o >= 0) producer[o] = v;
      }
      continue;
    }
    d.box = add_node(g, n.name);
    set(d.box, "label", label_text(n.op) + types_label(f, n.outputs));
    set(d.box, "fillcolor", k.colour);
    set(d.box, "class", k.css);
    set(d.box, "tooltip", n.source.empty() ? n.name + ": " + n.op : n.name + ": " + n.source);
    for (int o : n.outputs)
      if (o >= 0) producer[o] = d.box;
  }
  // One edge per producer and reader, however many values flow between them;
  // created in node order so the layout does not depend on addresses.
  std::set<std::pair<Agnode_t*, Agnode_t*>> linked;
  auto link = [&](Agnode_t* from, Agnode_t* to) {
    if (from && linked.insert({from, to}).second) agedge(g, from, to, nullptr, 1);
  };
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const ts::GraphNode& n = f.nodes[i];
    const Drawn& d = drawn[i];
    if (d.box) {
      for (int u : n.inputs)
        if (u >= 0) link(producer[u], d.box);
      continue;
    }
    for (size_t j = 0; j < d.ms.size(); ++j)
      for (const auto& [in, a] : d.ms[j].args) {
        const int u = in ? n.inputs[a] : -1;  // an input's producer is outside the group
        link(in ? (u >= 0 ? producer[u] : nullptr) : d.mv[a], d.mv[j]);
      }
  }

  if (gvLayout(gvc.get(), g, "dot") != 0)
    ts::fail("graphviz: cannot lay out " + f.name + ": " + g_errors);
  char* data = nullptr;
  unsigned len = 0;
  const int rc = gvRenderData(gvc.get(), g, "svg", &data, &len);
  std::string svg = rc == 0 && data ? std::string(data, len) : std::string();
  if (data) gvFreeRenderData(data);
  gvFreeLayout(gvc.get(), g);
  if (rc != 0 || svg.empty()) ts::fail("graphviz: cannot render " + f.name + " as SVG: " + g_errors);
  return svg;
}

}  // namespace tscli
