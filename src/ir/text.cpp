#include "ir/text.h"

#include <cctype>
#include <cstring>
#include <sstream>
#include <unordered_map>

namespace ts {

namespace {

std::string port_attrs(const Port& p, bool output) {
  std::string s = std::string("{role=") + role_name(p.role);
  if (!p.state.empty()) s += ", state=" + p.state;
  if (p.index != 0) s += ", index=" + std::to_string(p.index);
  if (p.batch_dim != 0) s += ", batch_dim=" + std::to_string(p.batch_dim);
  if (output && !p.name.empty()) s += ", name=" + p.name;
  return s + "}";
}

std::string value_ref(const Function& f, int v, const char* none) {
  return v >= 0 ? "%" + f.value_names[v] : none;
}

// A cursor over one line; every error names the line.
struct Cursor {
  const std::string& s;
  int line;
  size_t p = 0;

  [[noreturn]] void fail(const std::string& msg) const {
    ts::fail("ir text line " + std::to_string(line) + ": " + msg);
  }
  void ws() {
    while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
  }
  bool at_end() {
    ws();
    return p >= s.size();
  }
  bool eat(char c) {
    ws();
    if (p < s.size() && s[p] == c) {
      ++p;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "' at column " + std::to_string(p + 1));
  }
  // A name, op or attribute word: anything but whitespace and punctuation.
  std::string word() {
    ws();
    size_t b = p;
    while (p < s.size() && !std::isspace(static_cast<unsigned char>(s[p])) &&
           !std::strchr(",(){}[]:=", s[p]))
      ++p;
    if (p == b) fail("expected a name at column " + std::to_string(b + 1));
    return s.substr(b, p - b);
  }
  std::string value_name() {
    expect('%');
    return word();
  }
  TensorType type() {
    TensorType t;
    std::string dt = word();
    try {
      t.dtype = dtype_from_name(dt);
    } catch (const Error& e) {
      fail(e.what());
    }
    expect('[');
    if (eat(']')) return t;
    do {
      std::string d = word();
      char* end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (*end || v < 0) fail("bad dimension '" + d + "'");
      t.shape.push_back(v);
    } while (eat(','));
    expect(']');
    const std::string over = shape_limit_error(t.shape);
    if (!over.empty()) fail("type " + t.str() + ": " + over);
    return t;
  }
  // `{role=R, state=S, index=I, batch_dim=B}`, and on outputs `name=N`
  void port_attrs(Port& port, bool output) {
    expect('{');
    bool has_role = false;
    do {
      std::string k = word();
      expect('=');
      std::string v = word();
      if (k == "role") {
        if (!parse_role(v, &port.role))
          fail("unknown role '" + v + "' (expected one of " + role_names() + ")");
        has_role = true;
      }
      else if (k == "state") port.state = v;
      else if (k == "index") port.index = std::atoi(v.c_str());
      else if (k == "batch_dim") {
        if (v.empty() || v.size() > 2 || !std::isdigit(static_cast<unsigned char>(v[0])) ||
            !std::isdigit(static_cast<unsigned char>(v.back())))
          fail("batch_dim must be a dim index, got '" + v + "'");
        port.batch_dim = std::atoi(v.c_str());
      }
      else if (k == "name" && output) port.name = v;  // an input's name is its value's
      else fail("unknown port attribute '" + k + "'");
    } while (eat(','));
    expect('}');
    if (!has_role) fail("port without a role");
  }
};

struct Builder {
  Function f;
  std::unordered_map<std::string, int> ids;
  std::vector<int> node_line;

  int define(Cursor& c, const std::string& name, const TensorType& t) {
    if (ids.count(name)) c.fail("value '" + name + "' is defined twice");
    ids[name] = static_cast<int>(f.value_names.size());
    f.value_names.push_back(name);
    f.value_types.push_back(t);
    f.producer.push_back(static_cast<int>(f.nodes.size()) - 1);
    return ids[name];
  }
  int use(Cursor& c, const std::string& name) {
    auto it = ids.find(name);
    if (it == ids.end()) c.fail("value '" + name + "' is not defined before its use");
    return it->second;
  }

  void header(Cursor& c) {
    if (c.word() != "func") c.fail("expected 'func NAME(...) {'");
    f.name = c.word();
    c.expect('(');
    if (!c.eat(')')) {
      do {
        Port p;
        p.name = c.value_name();
        c.expect(':');
        p.type = c.type();
        c.port_attrs(p, false);
        p.value = define(c, p.name, p.type);
        f.inputs.push_back(p);
      } while (c.eat(','));
      c.expect(')');
    }
    c.expect('{');
    if (!c.at_end()) c.fail("unexpected text after '{'");
  }

  void node(Cursor& c) {
    Node n;
    std::vector<std::string> outs;
    do {
      if (c.eat('_')) outs.push_back("");
      else outs.push_back(c.value_name());
    } while (c.eat(','));
    c.expect('=');
    n.op = c.word();
    c.expect('(');
    if (!c.eat(')')) {
      do {
        c.ws();
        if (c.s.compare(c.p, 4, "None") == 0) {
          c.p += 4;
          n.inputs.push_back(-1);
        } else {
          n.inputs.push_back(use(c, c.value_name()));
        }
      } while (c.eat(','));
      c.expect(')');
    }
    n.attrs = json::object();
    if (!c.at_end()) {
      try {
        n.attrs = json::parse(c.s.substr(c.p));
      } catch (const json::exception& e) {
        c.fail(std::string("bad attrs JSON: ") + e.what());
      }
      if (!n.attrs.is_object()) c.fail("attrs must be a JSON object");
    }
    n.name = "#" + std::to_string(f.nodes.size());
    for (const auto& o : outs)
      if (!o.empty()) {
        n.name = o;
        break;
      }
    f.nodes.push_back(std::move(n));
    node_line.push_back(c.line);
    for (const auto& o : outs)  // types are filled in by infer_types()
      f.nodes.back().outputs.push_back(o.empty() ? -1 : define(c, o, TensorType{}));
  }

  void ret(Cursor& c) {
    if (c.at_end()) return;
    do {
      Port p;
      p.value = use(c, c.value_name());
      c.port_attrs(p, true);
      f.outputs.push_back(p);
    } while (c.eat(','));
    if (!c.at_end()) c.fail("unexpected text after the return list");
  }

  // Node output types come from the ops' infer, in program order.
  void infer_types() {
    const OpRegistry& reg = OpRegistry::get();
    for (size_t i = 0; i < f.nodes.size(); ++i) {
      Node& n = f.nodes[i];
      std::string where = "ir text line " + std::to_string(node_line[i]) + ": ";
      n.def = reg.find(n.op);
      if (!n.def) fail(where + "unknown op '" + n.op + "'");
      NodeCtx ctx = node_ctx(f, n);
      try {
        n.declared = n.def->infer(ctx);
      } catch (const Error& e) {
        fail(where + e.what());
      }
      if (n.declared.size() != n.outputs.size())
        fail(where + n.op + " has " + std::to_string(n.declared.size()) + " outputs, the text lists " +
             std::to_string(n.outputs.size()));
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        const std::string over = shape_limit_error(n.declared[k].shape);
        if (!over.empty())
          fail(where + "node '" + n.name + "' (" + n.op + "): output " + std::to_string(k) + " is " +
               n.declared[k].str() + ": " + over);
        if (n.outputs[k] >= 0) f.value_types[n.outputs[k]] = n.declared[k];
      }
    }
    for (auto& p : f.outputs) p.type = f.value_types[p.value];
  }
};

}  // namespace

std::string print_function(const Function& f) {
  std::string s = "func " + f.name + "(";
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Port& p = f.inputs[i];
    s += (i ? ", %" : "%") + f.value_names[p.value] + ": " + p.type.str() + " " + port_attrs(p, false);
  }
  s += ") {\n";
  for (const Node& n : f.nodes) {
    if (n.dead) continue;
    s += "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      s += (k ? ", " : "") + value_ref(f, n.outputs[k], "_");
    s += " = " + n.op + "(";
    for (size_t k = 0; k < n.inputs.size(); ++k)
      s += (k ? ", " : "") + value_ref(f, n.inputs[k], "None");
    s += ")";
    if (!n.attrs.empty()) s += " " + n.attrs.dump();
    s += "\n";
  }
  s += "  return";
  for (size_t i = 0; i < f.outputs.size(); ++i)
    s += (i ? ", %" : " %") + f.value_names[f.outputs[i].value] + " " + port_attrs(f.outputs[i], true);
  return s + "\n}\n";
}

Function parse_function(const std::string& text) {
  Builder b;
  std::istringstream in(text);
  std::string line;
  int no = 0;
  enum { kHeader, kBody, kReturned, kDone } state = kHeader;
  while (std::getline(in, line)) {
    ++no;
    Cursor c{line, no};
    if (c.at_end() || line[c.p] == '#') continue;
    if (state == kDone) c.fail("text after the closing '}'");
    if (state == kHeader) {
      b.header(c);
      state = kBody;
    } else if (c.eat('}')) {
      if (!c.at_end()) c.fail("unexpected text after '}'");
      state = kDone;
    } else if (c.s.compare(c.p, 6, "return") == 0 &&
               (c.p + 6 == c.s.size() || std::isspace(static_cast<unsigned char>(c.s[c.p + 6])))) {
      if (state == kReturned) c.fail("a second return");
      c.p += 6;
      b.ret(c);
      state = kReturned;
    } else {
      if (state == kReturned) c.fail("a node after the return");
      b.node(c);
    }
  }
  if (state != kDone) fail("ir text line " + std::to_string(no) + ": missing the closing '}'");
  b.infer_types();
  verify_function(b.f, "ir text");
  return std::move(b.f);
}

}  // namespace ts
