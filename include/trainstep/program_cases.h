// Run one-function programs from a case file, public: what `trainstep
// run-program` runs for the per-op oracle suite (tests/python/oracle/).
// Each case goes through the normal verify -> optimize -> compile -> run
// path once per compile mode, and every output is written to a results
// file. A failing case records its error (stage and message) and the
// batch goes on. File layouts: docs/format.md, "Program case files".
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace ts {

struct ProgramCaseOptions {
  // plain: the kernels exactly as exported, one thread. opt: every pass,
  // two threads (the parallel paths).
  std::vector<std::string> modes = {"plain", "opt"};
  // Called with each case's name before it runs (to find a crash).
  std::function<void(const std::string&)> on_case;
};

struct ProgramCaseSummary {
  size_t cases = 0;
  int failed_runs = 0;  // parse or verify failures, and failed runs of a mode
};

// Reads `cases_path`, writes `out_path`. A file that is not a case file,
// or an unknown mode, is a ts::Error.
ProgramCaseSummary run_program_cases(const std::string& cases_path, const std::string& out_path,
                                     const ProgramCaseOptions& o = {});

}  // namespace ts
