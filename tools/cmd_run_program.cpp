// `trainstep run-program CASES.safetensors OUT.safetensors`: runs many tiny
// one-function programs (the per-op oracle suite, tests/python/oracle/)
// through the normal verify -> optimize -> compile -> run path, once per
// compile mode, and writes every output. A failing case records its error
// and the batch goes on. File layout: docs/format.md, "Program case files".
#include <cstdio>

#include "commands.h"
#include "trainstep/program_cases.h"

namespace tscli {

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
      ts::ProgramCaseOptions po;
      po.modes = *modes;
      if (*progress)
        po.on_case = [](const std::string& name) { std::fprintf(stderr, "run-program: %s\n", name.c_str()); };
      const ts::ProgramCaseSummary r = ts::run_program_cases(*in, *out, po);
      std::printf("run-program: %zu cases, %d failed runs\n", r.cases, r.failed_runs);
      return 0;
    };
  });
}

}  // namespace tscli
