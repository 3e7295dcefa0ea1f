// build/trainstep: the single user-facing binary.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "trainstep/error.h"

int main(int argc, char** argv) {
  CLI::App app{"trainstep: train a captured PyTorch training step from C++"};
  app.require_subcommand(1);
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action();
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "trainstep: %s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "trainstep: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trainstep: internal error: %s\n", e.what());
  }
  return 1;
}
