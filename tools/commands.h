// The CLI's subcommands. Each file adds one or two subcommands to the app;
// main.cpp wires them up and turns ts::Error into a one-line message.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "trainstep/session.h"

namespace tscli {

using Action = std::function<int()>;

// Each returns the action to run if its subcommand was chosen.
void add_export(CLI::App& app, Action& action, const char* argv0);
void add_train(CLI::App& app, Action& action);
void add_eval(CLI::App& app, Action& action);
void add_verify(CLI::App& app, Action& action);
void add_inspect(CLI::App& app, Action& action);
void add_ops(CLI::App& app, Action& action);
void add_bench(CLI::App& app, Action& action);
void add_lr_schedule(CLI::App& app, Action& action);
void add_torch_checkpoint(CLI::App& app, Action& action, const char* argv0);
void add_plot(CLI::App& app, Action& action);
void add_data(CLI::App& app, Action& action);

// Runs MODULE.main(ARGS) of python/trainstep (through trainstep.launch)
// with an interpreter that can import torch; returns its exit status.
int run_python(const char* argv0, const std::vector<std::string>& module_args);
void add_run_program(CLI::App& app, Action& action);
void add_check(CLI::App& app, Action& action);

// Data-parallel runs (train --distributed mpi): the process's collective,
// kept until main ends so that an error on one rank can end them all
// (end_distributed(code) aborts every rank for a non-zero code, else lets
// MPI finish cleanly).
std::shared_ptr<ts::Collective>& distributed();
void end_distributed(int code);

// --distributed and its settings (tools/distributed.cpp).
struct Distributed {
  std::string kind;  // "" or "mpi"
  double timeout_s = 300, first_mb = 1, cap_mb = 25;
  bool overlap = true;
  bool shard_optimizer = false;
};
void add_distributed(CLI::App* cmd, Distributed& d);
// Starts the collective when --distributed is given (errors on any rank
// from here on end every rank: end_distributed) and sets the session's
// collective and buckets.
void start_distributed(const Distributed& d, ts::SessionOptions& o);

// One line on stderr when `path` has no checksums (written before them).
void note_if_unchecked(const std::string& path, bool checksummed);

// An integer option's lower bound: "--keep: must be an integer >= 1, got
// '0'" (CLI11's PositiveNumber would print the range up to DBL_MAX).
inline CLI::Validator at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        long long v = 0;
        if (CLI::detail::lexical_cast(s, v) && v >= lo) return "";
        return "must be an integer >= " + std::to_string(lo) + ", got '" + s + "'";
      },
      "INT>=" + std::to_string(lo));
}

// A real option's lower bound; NaN and inf are refused too.
inline CLI::Validator finite_at_least(double lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        double v = 0;
        if (CLI::detail::lexical_cast(s, v) && std::isfinite(v) && v >= lo) return "";
        return "must be a finite number >= " + CLI::detail::to_string(lo) + ", got '" + s + "'";
      },
      "NUM>=" + CLI::detail::to_string(lo));
}

// Example command lines in the subcommand's --help, above the exit-status
// footer it inherits from the app (so add the app's footer first).
inline void add_examples(CLI::App* cmd, const std::vector<std::string>& lines) {
  std::string s = lines.size() == 1 ? "Example: " + lines[0] : "Examples:";
  if (lines.size() > 1)
    for (const auto& l : lines) s += "\n  " + l;
  cmd->footer(s + "\n\n" + cmd->get_footer());
}
inline void add_example(CLI::App* cmd, const std::string& line) {
  add_examples(cmd, {line});
}

// --threads and the compiler switches (--no-fusion, --no-inplace,
// --no-cleanup), shared by every command that opens a session.
void add_session_flags(CLI::App* cmd, ts::SessionOptions& o);

}  // namespace tscli
