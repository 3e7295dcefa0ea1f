// `trainstep verify ARTIFACT`: ts::verify (trainstep/verify.h) with a line
// per check as it comes. Final line: "verify: ok" or "verify: FAILED <what>"
// (exit status 3, exit_codes.h: a mismatch, not an unreadable artifact).
//
// --trace first runs golden step 0 through the unoptimised train_step and
// compares every node's value with the eager value the exporter recorded
// (`export --trace-values`), reporting the first node that diverges.
#include <cstdio>

#include "commands.h"
#include "exit_codes.h"
#include "trainstep/verify.h"

namespace tscli {

namespace {

// Prints the report's lines as verify goes; --quiet keeps failures only
// (and, of the trace's, the first).
struct Printer : ts::VerifyObserver {
  std::string path;
  bool on_device = false, quiet = false;
  int trace_mismatches = 0;

  void on_open(const ts::VerifyReport& r) override { note_if_unchecked(path, r.checksummed); }
  void on_start(const ts::VerifyReport& r) override {
    std::printf("verify: %s\n", r.tolerance.c_str());
    if (on_device) std::printf("verify: on %s\n", r.device.c_str());
  }
  void on_trace_mismatch(const ts::TraceMismatch& m) override {
    if (!quiet || ++trace_mismatches == 1) std::printf("  trace %s  MISMATCH\n", m.text.c_str());
  }
  void on_trace(const ts::TraceReport& t) override {
    if (t.mismatches.empty())
      std::printf("trace: all %d recorded node values match (step 0, unoptimised)\n", t.compared);
    else
      std::printf("trace: first divergence at %s (%zu of %d values differ)\n",
                  t.mismatches[0].text.c_str(), t.mismatches.size(), t.compared);
    if (t.unrecorded) std::printf("trace: %d node values were not recorded\n", t.unrecorded);
  }
  void on_check(const ts::VerifyCheck& c) override {
    if (!c.ok || !quiet)
      std::printf("  %-44s max_abs %.3e  of_scale %.3e  tol %.1e  max_rel %.3e  %s\n",
                  c.name.c_str(), c.max_abs, c.of_scale, c.tol, c.max_rel,
                  c.ok ? "ok" : "MISMATCH");
  }
};

}  // namespace

void add_verify(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("verify", "Replay the artifact's golden trace and compare");
  auto path = std::make_shared<std::string>();
  auto tol = std::make_shared<double>(1e-4);
  auto opts = std::make_shared<ts::VerifyOptions>();
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("artifact", *path, "NAME.tstep")->required();
  CLI::Option* tol_opt =
      cmd->add_option("--tol", *tol,
                      "allowed max |got - golden| relative to the tensor's largest |golden|, for "
                      "every value (default: each value's tolerance calibrated at export)")
          ->check(finite_at_least(0));
  add_session_flags(cmd, opts->session);
  add_examples(cmd, {"trainstep verify mnist.tstep", "trainstep verify mnist.tstep --trace --no-fusion",
                    "trainstep verify mnist.tstep --device cuda"});
  cmd->add_flag("--quiet,-q", *quiet, "print only failures and the final line");
  cmd->add_flag("--trace", opts->trace,
                "first compare every node of step 0 with the recorded eager values "
                "(artifact exported with --trace-values)");
  cmd->callback([=, &action] {
    action = [=] {
      ts::VerifyOptions o = *opts;
      if (tol_opt->count()) o.tol = *tol;
      Printer p;
      p.path = *path;
      p.on_device = o.session.device != ts::Device::Cpu;
      p.quiet = *quiet;
      const ts::VerifyReport r = ts::verify(*path, o, &p);
      if (!r.ok()) {
        std::printf("verify: FAILED %s\n", r.failure.c_str());
        return exit_code::kMismatch;
      }
      std::printf("verify: ok\n");
      return exit_code::kOk;
    };
  });
}

}  // namespace tscli
