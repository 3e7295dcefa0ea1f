// ts::run_program_cases: `trainstep run-program`, the per-op oracle's runner.
#include <cstring>

#include "io/safetensors.h"
#include "ir/program.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "trainstep/program_cases.h"

namespace ts {

namespace {

struct Mode {
  const char* name;
  CompileOptions compile;
  int threads;
};

// plain: the kernels exactly as exported, one thread. opt: every pass, two
// threads (the parallel paths).
const Mode kModes[] = {
    {"plain", {false, false, false}, 1},
    {"opt", {true, true, true}, 2},
};

const Mode& find_mode(const std::string& name) {
  for (const Mode& m : kModes)
    if (name == m.name) return m;
  fail("unknown mode '" + name + "' (plain, opt)");
}

json failure(const char* stage, const std::string& msg) {
  return {{"stage", stage}, {"error", msg}};
}

// Runs f in one mode; outputs are copied into `held` under "<case>/<mode>/<k>".
json run_mode(const Function& verified, const Mode& m, const std::string& cname,
              const SafeTensors& cases, std::vector<std::pair<std::string, HostTensor>>& held) {
  Function f = verified;
  json ops = json::array();
  try {
    optimize(f, m.compile);
  } catch (const Error& e) {
    return failure("optimize", e.what());
  }
  for (const auto& n : f.nodes) ops.push_back(n.op);
  std::unique_ptr<Executor> ex;
  try {
    ex = std::make_unique<Executor>(f, m.threads, m.compile.inplace);
  } catch (const Error& e) {
    return failure("compile", e.what());
  }
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Port& p = f.inputs[i];
    const std::string key = cname + "/" + p.name;
    const HostTensor* t = cases.find(key);
    if (!t) return failure("bind", "no tensor '" + key + "'");
    if (t->view.type() != p.type)
      return failure("bind", "tensor '" + key + "' is " + t->view.type().str() +
                                 " but the input is " + p.type.str());
    ex->bind_input(static_cast<int>(i), t->view.data);
  }
  try {
    ex->run();
  } catch (const Error& e) {
    return failure("run", e.what());
  }
  for (size_t k = 0; k < f.outputs.size(); ++k) {
    const Tensor& o = ex->output(static_cast<int>(k));
    HostTensor h(o.dtype, o.shape);
    if (o.nbytes()) std::memcpy(h.view.data, o.data, o.nbytes());
    held.emplace_back(cname + "/" + m.name + "/" + std::to_string(k), std::move(h));
  }
  return {{"ops", ops}};
}

}  // namespace

ProgramCaseSummary run_program_cases(const std::string& cases_path, const std::string& out_path,
                                     const ProgramCaseOptions& o) {
  std::vector<const Mode*> ms;
  for (const auto& m : o.modes) ms.push_back(&find_mode(m));
  SafeTensors cases = read_safetensors(cases_path);
  auto meta = [&](const char* k) {
    auto it = cases.metadata.find(k);
    return it == cases.metadata.end() ? std::string() : it->second;
  };
  if (meta("format") != "trainstep-cases" || meta("format_version") != "1")
    fail(cases_path + ": not a trainstep case file (format trainstep-cases, version 1)");
  json list;
  try {
    list = json::parse(meta("cases"));
  } catch (const json::exception& e) {
    fail(cases_path + ": the cases JSON is corrupt: " + e.what());
  }
  if (!list.is_array()) fail(cases_path + ": 'cases' must be a JSON list");
  json results = json::object();
  std::vector<std::pair<std::string, HostTensor>> held;
  int failed = 0;
  for (const auto& c : list) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() ||
        !c.contains("function"))
      fail(cases_path + ": each case needs a 'name' and a 'function'");
    const std::string name = c["name"];
    if (o.on_case) o.on_case(name);
    json& r = results[name];
    Function f;
    try {
      f = parse_function_json(c["function"], name, cases_path);
    } catch (const Error& e) {
      r = failure("parse", e.what());
      ++failed;
      continue;
    }
    try {
      verify_function(f, cases_path);
    } catch (const Error& e) {
      r = failure("verify", e.what());
      ++failed;
      continue;
    }
    for (const Mode* m : ms) {
      r[m->name] = run_mode(f, *m, name, cases, held);
      failed += r[m->name].contains("error");
    }
  }
  NamedTensors outs;
  for (const auto& [k, t] : held) outs.emplace_back(k, &t.view);
  write_safetensors(out_path, {{"format", "trainstep-case-results"}, {"results", results.dump()}},
                    outs);
  return {list.size(), failed};
}

}  // namespace ts
