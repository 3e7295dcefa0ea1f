#include "graph_svg.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <memory>
#include <set>

#include "svg.h"
#include "trainstep/error.h"

namespace tscli {

namespace {

struct Kind {
  const char* colour;
  const char* legend;
  const char* css;  // extra class on the node's <g>
};

Kind kind(Fusion k) {
  switch (k) {
    case Fusion::Elementwise: return {"#fdd49e", "fused elementwise group", "fused-elementwise"};
    case Fusion::PostOp: return {"#c6dbef", "oneDNN post-op (conv + relu)", "fused-post-op"};
    case Fusion::Folded:
      return {"#c7e9c0", "folded into the kernel (relu backward, transpose)", "fused-folded"};
    case Fusion::None: break;
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

std::string node_label(const ts::Function& f, const ts::Node& n) {
  std::string s = label_text(n.op);
  if (n.op == "trainstep.fused_elementwise" && n.attrs.contains("members")) {
    int i = 0;
    std::string line;
    for (const auto& m : n.attrs["members"]) {
      if (i && i % 5 == 0) {
        s += "\\n" + label_text(line);
        line.clear();
      }
      line += (line.empty() ? "" : " · ") + short_op(m.value("op", "?"));
      ++i;
    }
    if (!line.empty()) s += "\\n" + label_text(line);
  }
  int shown = 0;
  for (int v : n.outputs) {
    if (shown == 3) {
      s += "\\n+" + std::to_string(n.outputs.size() - 3) + " more";
      break;
    }
    s += "\\n" + (v < 0 ? std::string("_") : label_text(f.value_types[v].str()));
    ++shown;
  }
  return s;
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

std::string legend_html(const ts::Function& f) {
  int counts[4] = {0, 0, 0, 0};
  for (const auto& n : f.nodes) counts[static_cast<int>(fusion_of(n))]++;
  // One row a kind, so the legend stays narrow however wide the graph is.
  std::string h = "<table border=\"0\" cellborder=\"1\" cellspacing=\"2\" cellpadding=\"3\">"
                  "<tr><td border=\"0\"><b>" +
                  xml_escape(f.name + " after the compiler's passes: " +
                             std::to_string(f.nodes.size()) + " nodes") +
                  "</b></td></tr>";
  for (Fusion k : {Fusion::Elementwise, Fusion::PostOp, Fusion::Folded, Fusion::None}) {
    const Kind d = kind(k);
    h += std::string("<tr><td bgcolor=\"") + d.colour + "\">" + xml_escape(d.legend) + ": " +
         std::to_string(counts[static_cast<int>(k)]) + "</td></tr>";
  }
  return h + "</table>";
}

}  // namespace

Fusion fusion_of(const ts::Node& n) {
  if (n.op == "trainstep.fused_elementwise") return Fusion::Elementwise;
  if (n.op == "trainstep.conv2d_relu") return Fusion::PostOp;
  if (n.op == "trainstep.conv_backward_relu" || n.op == "trainstep.max_pool2d_code" ||
      n.op == "trainstep.max_pool2d_code_backward" || n.op == "trainstep.matmul")
    return Fusion::Folded;
  return Fusion::None;
}

std::string graph_svg(const ts::Function& f) {
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

  std::vector<Agnode_t*> gv_nodes;
  std::vector<int> producer(f.value_names.size(), -1);
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const ts::Node& n = f.nodes[i];
    Agnode_t* v = agnode(g, const_cast<char*>(n.name.c_str()), 1);
    set(v, "label", node_label(f, n));
    const Kind k = kind(fusion_of(n));
    set(v, "fillcolor", k.colour);
    set(v, "class", k.css);
    set(v, "tooltip", n.source.empty() ? n.name + ": " + n.op : n.name + ": " + n.source);
    gv_nodes.push_back(v);
    for (int o : n.outputs)
      if (o >= 0) producer[o] = static_cast<int>(i);
  }
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    std::set<int> from;  // one edge per producer, however many of its values are read
    for (int u : f.nodes[i].inputs)
      if (u >= 0 && producer[u] >= 0) from.insert(producer[u]);
    for (int p : from) agedge(g, gv_nodes[p], gv_nodes[i], nullptr, 1);
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
