#include "ir/program.h"

#include <algorithm>
#include <unordered_map>

namespace ts {

namespace {

constexpr size_t kMaxRank = 16;
constexpr int64_t kMaxNumel = int64_t(1) << 40;

struct Reader {
  const std::string& what;
  [[noreturn]] void fail(const std::string& where, const std::string& msg) const {
    ts::fail(what + ": program: " + where + ": " + msg);
  }
  const json& field(const json& j, const char* k, const std::string& where) const {
    if (!j.is_object() || !j.contains(k)) fail(where, std::string("missing field '") + k + "'");
    return j.at(k);
  }
  std::string str(const json& j, const char* k, const std::string& where) const {
    const json& v = field(j, k, where);
    if (!v.is_string()) fail(where, std::string("field '") + k + "' must be a string");
    return v.get<std::string>();
  }
  TensorType type(const json& j, const std::string& where) const {
    TensorType t;
    try {
      t.dtype = dtype_from_name(str(j, "dtype", where));
    } catch (const Error& e) {
      fail(where, e.what());
    }
    const json& s = field(j, "shape", where);
    if (!s.is_array()) fail(where, "shape must be a list of dims");
    // Limits checked here, before anything is sized from the program.
    if (s.size() > kMaxRank)
      fail(where, "shape has rank " + std::to_string(s.size()) + ", more than the limit of " +
                      std::to_string(kMaxRank));
    int64_t n = 1;
    for (const auto& d : s) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail(where, "shape " + s.dump() + ": dims must be non-negative integers");
      int64_t v = d.get<int64_t>();
      if (v > 0 && n > kMaxNumel / v)
        fail(where, "shape " + s.dump() + " has more than 2^40 elements");
      n *= v;
      t.shape.push_back(v);
    }
    return t;
  }
};

// A node's "source" object ({module, module_type, file, line, function},
// each optional) as one line; informational, so malformed parts are skipped.
std::string source_str(const json& s) {
  if (s.is_string()) return s.get<std::string>();
  if (!s.is_object()) return "";
  std::string r;
  if (s.contains("file") && s["file"].is_string()) {
    r = s["file"].get<std::string>();
    if (s.contains("line") && s["line"].is_number_integer()) r += ":" + std::to_string(s["line"].get<int64_t>());
  }
  if (s.contains("module_type") && s["module_type"].is_string()) {
    std::string m = s.contains("module") && s["module"].is_string() ? s["module"].get<std::string>() : "";
    r += (r.empty() ? "" : " ") + std::string("(module '") + m + "' " + s["module_type"].get<std::string>() + ")";
  }
  return r;
}

Port read_port(const Reader& r, const json& j, const std::string& where, bool is_input) {
  Port p;
  const std::string role = r.str(j, "role", where);
  if (!parse_role(role, &p.role))
    r.fail(where, "unknown role '" + role + "' (expected one of " + role_names() + ")");
  if (is_input) p.name = r.str(j, "name", where);
  else if (j.contains("name")) p.name = r.str(j, "name", where);
  if (j.contains("state")) p.state = r.str(j, "state", where);
  if (j.contains("index") && j.at("index").is_number_integer()) p.index = j.at("index").get<int>();
  p.type = r.type(j, where);
  if (j.contains("batch_dim")) {
    const json& b = j.at("batch_dim");
    if (!b.is_number_integer() || b.get<int64_t>() < 0 ||
        b.get<int64_t>() >= static_cast<int64_t>(p.type.shape.size()))
      r.fail(where, "batch_dim must be a dim of " + p.type.str() + ", got " + b.dump());
    p.batch_dim = b.get<int>();
  }
  return p;
}

Function read_function(const Reader& r, const std::string& fname, const json& j) {
  Function f;
  f.name = fname;
  std::unordered_map<std::string, int> ids;
  auto define = [&](const std::string& name, const TensorType& t, const std::string& where) {
    if (name.empty()) r.fail(where, "empty value name");
    if (ids.count(name)) r.fail(where, "value '" + name + "' is defined twice");
    ids[name] = static_cast<int>(f.value_names.size());
    f.value_names.push_back(name);
    f.value_types.push_back(t);
    return ids[name];
  };
  const std::string fw = "function '" + fname + "'";
  const json& ins = r.field(j, "inputs", fw);
  if (!ins.is_array()) r.fail(fw, "'inputs' must be a list");
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string where = fw + " input " + std::to_string(i);
    Port p = read_port(r, ins[i], where, true);
    p.value = define(p.name, p.type, where);
    f.producer.push_back(-1);
    f.inputs.push_back(p);
  }
  const json& nodes = r.field(j, "nodes", fw);
  if (!nodes.is_array()) r.fail(fw, "'nodes' must be a list");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& jn = nodes[i];
    Node n;
    n.name = jn.is_object() && jn.contains("name") && jn["name"].is_string()
                 ? jn["name"].get<std::string>()
                 : "#" + std::to_string(i);
    std::string where = fw + " node '" + n.name + "'";
    n.op = r.str(jn, "op", where);
    where += " (" + n.op + ")";
    n.attrs = jn.contains("attrs") ? jn["attrs"] : json::object();
    if (!n.attrs.is_object()) r.fail(where, "'attrs' must be an object");
    if (jn.contains("source")) n.source = source_str(jn["source"]);
    const json& in = r.field(jn, "inputs", where);
    if (!in.is_array()) r.fail(where, "'inputs' must be a list");
    for (const auto& v : in) {
      if (v.is_null()) {
        n.inputs.push_back(-1);
        continue;
      }
      if (!v.is_string()) r.fail(where, "inputs must be value names or null");
      auto it = ids.find(v.get<std::string>());
      if (it == ids.end())
        r.fail(where, "input '" + v.get<std::string>() + "' is not defined before this node");
      n.inputs.push_back(it->second);
    }
    const json& outs = r.field(jn, "outputs", where);
    const json& types = r.field(jn, "types", where);
    if (!outs.is_array() || !types.is_array() || outs.size() != types.size() || outs.empty())
      r.fail(where, "'outputs' and 'types' must be lists of the same, non-zero length");
    for (size_t k = 0; k < outs.size(); ++k) {
      TensorType t = types[k].is_null() ? TensorType{} : r.type(types[k], where);
      n.declared.push_back(t);
      if (outs[k].is_null()) {
        n.outputs.push_back(-1);
        continue;
      }
      if (!outs[k].is_string()) r.fail(where, "outputs must be value names or null");
      n.outputs.push_back(define(outs[k].get<std::string>(), t, where));
      f.producer.push_back(static_cast<int>(f.nodes.size()));
    }
    f.nodes.push_back(std::move(n));
  }
  const json& outs = r.field(j, "outputs", fw);
  if (!outs.is_array()) r.fail(fw, "'outputs' must be a list");
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string where = fw + " output " + std::to_string(i);
    Port p = read_port(r, outs[i], where, false);
    std::string v = r.str(outs[i], "value", where);
    auto it = ids.find(v);
    if (it == ids.end()) r.fail(where, "value '" + v + "' is not defined");
    p.value = it->second;
    f.outputs.push_back(p);
  }
  if (j.contains("grads")) {
    const json& gs = j.at("grads");
    if (!gs.is_array()) r.fail(fw, "'grads' must be a list");
    for (size_t i = 0; i < gs.size(); ++i) {
      std::string where = fw + " grad " + std::to_string(i);
      Port p = read_port(r, gs[i], where, false);
      if (p.role != Role::Grad || p.state.empty())
        r.fail(where, "must have role 'grad' and name its parameter ('state')");
      std::string v = r.str(gs[i], "value", where);
      auto it = ids.find(v);
      if (it == ids.end()) r.fail(where, "value '" + v + "' is not defined");
      p.value = it->second;
      f.grads.push_back(p);
    }
  }
  return f;
}

}  // namespace

const OpDef& def_of(const Node& n) {
  static const OpDef none;
  if (n.def) return *n.def;
  const OpDef* d = OpRegistry::get().find(n.op);
  return d ? *d : none;
}

int Function::find_input(Role role, const std::string& state) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].role == role && (state.empty() || inputs[i].state == state)) return int(i);
  return -1;
}

int Function::find_output(Role role, const std::string& state) const {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].role == role && (state.empty() || outputs[i].state == state)) return int(i);
  return -1;
}

namespace {
std::vector<int> ports_of(const std::vector<Port>& ports, Role role) {
  std::vector<int> r;
  for (size_t i = 0; i < ports.size(); ++i)
    if (ports[i].role == role) r.push_back(static_cast<int>(i));
  std::stable_sort(r.begin(), r.end(),
                   [&](int a, int b) { return ports[a].index < ports[b].index; });
  return r;
}
}  // namespace

std::vector<int> Function::inputs_of(Role role) const { return ports_of(inputs, role); }
std::vector<int> Function::outputs_of(Role role) const { return ports_of(outputs, role); }

const Function& Program::function(const std::string& n) const {
  auto it = functions.find(n);
  if (it == functions.end()) fail("program has no function '" + n + "'");
  return it->second;
}

const StateSpec* Program::find_state(const std::string& n) const {
  for (const auto& s : state)
    if (s.name == n) return &s;
  return nullptr;
}

Function parse_function_json(const json& j, const std::string& name, const std::string& what) {
  return read_function(Reader{what}, name, j);
}

Program parse_program(const json& j, const std::string& what) {
  Reader r{what};
  if (!j.is_object()) r.fail("top level", "must be a JSON object");
  Program p;
  if (r.str(j, "format", "top level") != "trainstep") r.fail("top level", "not a trainstep program");
  const json& v = r.field(j, "version", "top level");
  if (!v.is_number_integer()) r.fail("top level", "'version' must be an integer");
  p.version = v.get<int>();
  if (p.version != kFormatVersion)
    fail(what + ": unsupported format version " + std::to_string(p.version) +
         " (this build reads version " + std::to_string(kFormatVersion) + ")");
  p.name = r.str(j, "name", "top level");
  const json& bs = r.field(j, "batch_size", "top level");
  if (!bs.is_number_integer() || bs.get<int64_t>() <= 0)
    r.fail("top level", "'batch_size' must be a positive integer");
  p.batch_size = bs.get<int64_t>();
  for (auto [key, field] : {std::pair{"torch_version", &p.torch_version},
                             std::pair{"python_version", &p.python_version}})
    if (j.contains(key) && j[key].is_string()) *field = j[key].get<std::string>();
  p.optimizer = j.value("optimizer", json::object());
  p.golden = j.value("golden", json::object());
  const json& st = r.field(j, "state", "top level");
  if (!st.is_array()) r.fail("top level", "'state' must be a list");
  for (size_t i = 0; i < st.size(); ++i) {
    std::string where = "state " + std::to_string(i);
    StateSpec s{r.str(st[i], "name", where), r.str(st[i], "kind", where), r.type(st[i], where)};
    if (p.find_state(s.name)) r.fail(where, "state '" + s.name + "' listed twice");
    p.state.push_back(s);
  }
  if (j.contains("aliases")) {
    const json& al = j.at("aliases");
    if (!al.is_object()) r.fail("top level", "'aliases' must be an object");
    for (auto it = al.begin(); it != al.end(); ++it) {
      if (!it.value().is_string()) r.fail("aliases", "'" + it.key() + "' must name a state tensor");
      std::string target = it.value().get<std::string>();
      if (!p.find_state(target))
        r.fail("aliases", "'" + it.key() + "' names unknown state '" + target + "'");
      if (p.find_state(it.key()))
        r.fail("aliases", "'" + it.key() + "' is a state tensor, not an alias");
      p.aliases[it.key()] = target;
    }
  }
  const json& fs = r.field(j, "functions", "top level");
  if (!fs.is_object()) r.fail("top level", "'functions' must be an object");
  for (auto it = fs.begin(); it != fs.end(); ++it)
    p.functions[it.key()] = read_function(r, it.key(), it.value());
  for (const char* need : {"train_step", "eval_step"})
    if (!p.functions.count(need)) r.fail("top level", std::string("missing function '") + need + "'");
  if (p.functions.count("grad_step") != p.functions.count("apply_step"))
    r.fail("top level", "grad_step and apply_step come together (one is missing)");
  for (auto& [name, f] : p.functions) {
    for (const auto& port : f.inputs) {
      if (port.role != Role::State && port.role != Role::Grad) continue;
      const StateSpec* s = p.find_state(port.state);
      if (!s) r.fail("function '" + name + "'", "input for unknown state '" + port.state + "'");
      if (s->type != port.type)
        r.fail("function '" + name + "'", "state '" + port.state + "' is " + s->type.str() +
                                              " but the input is " + port.type.str());
    }
    for (const auto& port : f.grads) {
      const StateSpec* s = p.find_state(port.state);
      if (!s || s->kind != "param")
        r.fail("function '" + name + "'", "gradient of '" + port.state + "', not a parameter");
      if (s->type != port.type)
        r.fail("function '" + name + "'", "parameter '" + port.state + "' is " + s->type.str() +
                                              " but its gradient is " + port.type.str());
    }
    verify_function(f, what);
  }
  return p;
}

std::string shape_limit_error(const Shape& s) {
  if (s.size() > kMaxRank)
    return "rank " + std::to_string(s.size()) + " is more than the limit of " + std::to_string(kMaxRank);
  int64_t n = 1;
  for (int64_t v : s) {
    if (v < 0) return "a dim is negative";
    if (v > 0 && n > kMaxNumel / v) return "more than 2^40 elements";
    n *= v;
  }
  return "";
}

NodeCtx node_ctx(const Function& f, const Node& n) {
  std::vector<TensorType> in;
  std::vector<bool> present;
  for (int v : n.inputs) {
    in.push_back(v >= 0 ? f.value_types[v] : TensorType{});
    present.push_back(v >= 0);
  }
  return NodeCtx(n.name, n.op, n.attrs, std::move(in), std::move(present));
}

void verify_function(Function& f, const std::string& what) {
  const OpRegistry& reg = OpRegistry::get();
  for (auto& n : f.nodes) {
    n.def = reg.find(n.op);
    std::string where = what + ": function '" + f.name + "': node '" + n.name + "' (" + n.op + ")";
    if (!n.def)
      fail(where + ": unsupported op (see docs/ops.md for the supported list)" +
           (n.source.empty() ? "" : "; from " + n.source));
    NodeCtx ctx = node_ctx(f, n);
    std::vector<TensorType> out;
    try {
      out = n.def->infer(ctx);
    } catch (const Error& e) {
      fail(what + ": function '" + f.name + "': " + e.what());
    }
    if (n.def->bf16 == Bf16::No) {
      bool bf16 = false;
      for (int v : n.inputs) bf16 = bf16 || (v >= 0 && f.value_types[v].dtype == DType::BF16);
      for (const auto& t : out) bf16 = bf16 || t.dtype == DType::BF16;
      if (bf16)
        fail(where + ": bfloat16 is not supported by this op (docs/bf16.md)" +
             (n.source.empty() ? "" : "; from " + n.source));
    }
    if (out.size() != n.outputs.size())
      fail(where + ": op produces " + std::to_string(out.size()) + " outputs, program lists " +
           std::to_string(n.outputs.size()));
    for (size_t k = 0; k < out.size(); ++k) {
      const std::string over = shape_limit_error(out[k].shape);
      if (!over.empty())
        fail(where + ": output " + std::to_string(k) + " is " + out[k].str() + ": " + over);
      if (n.outputs[k] < 0) {
        // Nobody reads it, so the program's type (maybe null) was never
        // checked: the kernel is built with the inferred one instead.
        n.declared[k] = out[k];
        continue;
      }
      if (out[k] != n.declared[k])
        fail(where + ": output " + std::to_string(k) + " is " + out[k].str() +
             " but the program declares " + n.declared[k].str());
      f.value_types[n.outputs[k]] = out[k];  // keeps the `wrapped` flag
    }
  }
  for (const auto& p : f.outputs)
    if (f.value_types[p.value] != p.type)
      fail(what + ": function '" + f.name + "': output '" + f.value_names[p.value] + "' is " +
           f.value_types[p.value].str() + " but the signature says " + p.type.str());
  for (const auto& p : f.grads)
    if (f.value_types[p.value] != p.type)
      fail(what + ": function '" + f.name + "': the gradient of '" + p.state + "' ('" +
           f.value_names[p.value] + "') is " + f.value_types[p.value].str() +
           " but the program says " + p.type.str());
}

std::string node_str(const Function& f, const Node& n) {
  std::string s;
  for (size_t k = 0; k < n.outputs.size(); ++k)
    s += (k ? ", " : "") + (n.outputs[k] >= 0 ? "%" + f.value_names[n.outputs[k]] : "_");
  s += " = " + n.op + "(";
  for (size_t k = 0; k < n.inputs.size(); ++k)
    s += (k ? ", " : "") + (n.inputs[k] >= 0 ? "%" + f.value_names[n.inputs[k]] : "None");
  if (!n.attrs.empty()) s += (n.inputs.empty() ? "" : ", ") + n.attrs.dump();
  return s + ")";
}

}  // namespace ts
