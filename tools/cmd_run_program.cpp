// `trainstep run-program CASES.safetensors OUT.safetensors`: runs many tiny
// one-function programs (the per-op oracle suite, tests/python/oracle/)
// through the normal verify -> optimize -> compile -> run path, once per
// compile mode, and writes every output. A failing case records its error
// and the batch goes on. File layout: docs/format.md, "Program case files".
#include <cstdio>
#include <cstring>
#include <map>

#include "commands.h"
#include "io/safetensors.h"
#include "ir/program.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "trainstep/error.h"

namespace tscli {

namespace {

struct Mode {
  const char* name;
  ts::CompileOptions compile;
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
  ts::fail("unknown mode '" + name + "' (plain, opt)");
}

ts::json failure(const char* stage, const std::string& msg) {
  return {{"stage", stage}, {"error", msg}};
}

// Runs f in one mode; outputs are copied into `held` under "<case>/<mode>/<k>".
ts::json run_mode(const ts::Function& verified, const Mode& m, const std::string& cname,
                  const ts::SafeTensors& cases,
                  std::vector<std::pair<std::string, ts::HostTensor>>& held) {
  ts::Function f = verified;
  ts::json ops = ts::json::array();
  try {
    ts::optimize(f, m.compile);
  } catch (const ts::Error& e) {
    return failure("optimize", e.what());
  }
  for (const auto& n : f.nodes) ops.push_back(n.op);
  std::unique_ptr<ts::Executor> ex;
  try {
    ex = std::make_unique<ts::Executor>(f, m.threads, m.compile.inplace);
  } catch (const ts::Error& e) {
    return failure("compile", e.what());
  }
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const ts::Port& p = f.inputs[i];
    const std::string key = cname + "/" + p.name;
    const ts::HostTensor* t = cases.find(key);
    if (!t) return failure("bind", "no tensor '" + key + "'");
    if (t->view.type() != p.type)
      return failure("bind", "tensor '" + key + "' is " + t->view.type().str() +
                                 " but the input is " + p.type.str());
    ex->bind_input(static_cast<int>(i), t->view.data);
  }
  try {
    ex->run();
  } catch (const ts::Error& e) {
    return failure("run", e.what());
  }
  for (size_t k = 0; k < f.outputs.size(); ++k) {
    const ts::Tensor& o = ex->output(static_cast<int>(k));
    ts::HostTensor h(o.dtype, o.shape);
    if (o.nbytes()) std::memcpy(h.view.data, o.data, o.nbytes());
    held.emplace_back(cname + "/" + m.name + "/" + std::to_string(k), std::move(h));
  }
  return {{"ops", ops}};
}

}  // namespace

void add_run_program(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "run-program", "Run one-function programs from a case file (the per-op oracle suite)");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto modes = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"plain", "opt"});
  cmd->add_option("cases", *in, "CASES.safetensors (docs/format.md)")->required();
  cmd->add_option("out", *out, "OUT.safetensors: outputs and per-case results")->required();
  auto progress = std::make_shared<bool>(false);
  cmd->add_option("--mode", *modes, "compile modes to run each case in: plain, opt (default both)");
  cmd->add_flag("--progress", *progress, "print each case's name before it runs (to find a crash)");
  add_example(cmd, "trainstep run-program cases.safetensors results.safetensors --mode opt");
  cmd->callback([=, &action] {
    action = [=] {
      std::vector<const Mode*> ms;
      for (const auto& m : *modes) ms.push_back(&find_mode(m));
      ts::SafeTensors cases = ts::read_safetensors(*in);
      auto meta = [&](const char* k) {
        auto it = cases.metadata.find(k);
        return it == cases.metadata.end() ? std::string() : it->second;
      };
      if (meta("format") != "trainstep-cases" || meta("format_version") != "1")
        ts::fail(*in + ": not a trainstep case file (format trainstep-cases, version 1)");
      ts::json list;
      try {
        list = ts::json::parse(meta("cases"));
      } catch (const ts::json::exception& e) {
        ts::fail(*in + ": the cases JSON is corrupt: " + e.what());
      }
      if (!list.is_array()) ts::fail(*in + ": 'cases' must be a JSON list");
      ts::json results = ts::json::object();
      std::vector<std::pair<std::string, ts::HostTensor>> held;
      int failed = 0;
      for (const auto& c : list) {
        if (!c.is_object() || !c.contains("name") || !c["name"].is_string() ||
            !c.contains("function"))
          ts::fail(*in + ": each case needs a 'name' and a 'function'");
        const std::string name = c["name"];
        if (*progress) std::fprintf(stderr, "run-program: %s\n", name.c_str());
        ts::json& r = results[name];
        ts::Function f;
        try {
          f = ts::parse_function_json(c["function"], name, *in);
        } catch (const ts::Error& e) {
          r = failure("parse", e.what());
          ++failed;
          continue;
        }
        try {
          ts::verify_function(f, *in);
        } catch (const ts::Error& e) {
          r = failure("verify", e.what());
          ++failed;
          continue;
        }
        for (const Mode* m : ms) {
          r[m->name] = run_mode(f, *m, name, cases, held);
          failed += r[m->name].contains("error");
        }
      }
      ts::NamedTensors outs;
      for (const auto& [k, t] : held) outs.emplace_back(k, &t.view);
      ts::write_safetensors(*out, {{"format", "trainstep-case-results"}, {"results", results.dump()}},
                            outs);
      std::printf("run-program: %zu cases, %d failed runs\n", list.size(), failed);
      return 0;
    };
  });
}

}  // namespace tscli
