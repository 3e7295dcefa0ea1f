// build/trainstep: the single user-facing binary. Every failure ends as one
// line on stderr and an exit status of exit_codes.h.
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <typeinfo>

#include "commands.h"
#include "exit_codes.h"
#include "trainstep/cpu.h"
#include "trainstep/error.h"

namespace {

// The subcommand the parse got to, for "see trainstep NAME --help".
std::string usage_hint(const CLI::App& app) {
  auto subs = app.get_subcommands();
  std::string name = subs.empty() ? "trainstep" : "trainstep " + subs.back()->get_name();
  return "see '" + name + " --help'";
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string type_name(const std::exception& e) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> s(
      abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status), std::free);
  return status == 0 && s ? s.get() : typeid(e).name();
}

}  // namespace

int main(int argc, char** argv) {
  namespace ec = tscli::exit_code;
  // Line-buffered even under a pipe, so a log (Slurm, tee) shows each line
  // as it is printed rather than in blocks at exit.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"trainstep: train a captured PyTorch training step from C++"};
  app.require_subcommand(1);
  // The exporter package's version too (python/trainstep/__init__.py).
  app.set_version_flag("--version", "trainstep " TRAINSTEP_VERSION);
  app.footer(ec::kHelpFooter);
  bool debug = false;
  app.add_flag("--debug", debug,
               "on an error, print more detail (the Python side's full traceback)");
  app.fallthrough();  // --debug after the subcommand too; inherited by the subcommands below
  tscli::Action action;
  tscli::add_export(app, action, argv[0]);
  tscli::add_train(app, action);
  tscli::add_eval(app, action);
  tscli::add_verify(app, action);
  tscli::add_inspect(app, action);
  tscli::add_ops(app, action);
  tscli::add_bench(app, action);
  tscli::add_lr_schedule(app, action);
  tscli::add_torch_checkpoint(app, action, argv[0]);
  tscli::add_run_program(app, action);
  tscli::add_check(app, action);
  tscli::add_plot(app, action);
  tscli::add_data(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with status 0; every other one is usage.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::string what = one_line(e.what());
    if (app.get_subcommands().empty())  // CLI11 calls an unknown command a missing one
      for (int i = 1; i < argc; ++i)
        if (argv[i][0] != '-') {
          what = std::string("unknown command '") + argv[i] + "'";
          break;
        }
    std::fprintf(stderr, "trainstep: %s (%s)\n", what.c_str(), usage_hint(app).c_str());
    return ec::kUsage;
  }
  // The Python side (export, import/export-checkpoint) reads it from the environment.
  if (debug) setenv("TRAINSTEP_DEBUG", "1", 1);
  const char* env = std::getenv("TRAINSTEP_DEBUG");
  debug = env && *env && std::string(env) != "0";
  try {
    ts::check_cpu_baseline();
    ts::apply_cpu_isa_env();  // TRAINSTEP_ISA: a forced kernel level, for every command
    const int rc = action();
    tscli::end_distributed(0);
    return rc;
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "trainstep: %s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "trainstep: out of memory\n");
  } catch (const std::filesystem::filesystem_error& e) {
    // A path we could not create, read or rename: bad input, not a bug.
    std::fprintf(stderr, "trainstep: %s: %s\n", e.path1().c_str(), e.code().message().c_str());
  } catch (const std::exception& e) {
    if (debug)
      std::fprintf(stderr, "trainstep: internal error (%s): %s\n", type_name(e).c_str(), e.what());
    else
      std::fprintf(stderr, "trainstep: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "trainstep: internal error: an unknown exception\n");
  }
  tscli::end_distributed(ec::kFailure);  // the other ranks would wait for this one
  return ec::kFailure;
}
