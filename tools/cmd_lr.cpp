// `trainstep lr-schedule SPEC --base-lr X --steps N`: the LR sequence a
// schedule gives (one value per scheduler step, starting at index 0), as a
// JSON array of %.17g numbers.
#include <cstdio>

#include "commands.h"
#include "trainstep/lr_schedule.h"

namespace tscli {

void add_lr_schedule(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("lr-schedule", "Print an LR schedule's sequence as JSON");
  auto spec = std::make_shared<std::string>();
  auto base = std::make_shared<double>(0.1);
  auto steps = std::make_shared<int64_t>(10);
  cmd->add_option("spec", *spec, "schedule spec (see --lr-schedule of train)")->required();
  cmd->add_option("--base-lr", *base, "base learning rate (default 0.1)");
  cmd->add_option("--steps", *steps, "number of values (default 10)")->check(at_least(0));
  add_example(cmd, "trainstep lr-schedule cosine:10 --base-lr 0.1 --steps 10");
  cmd->callback([=, &action] {
    action = [=] {
      const std::vector<double> seq = ts::lr_sequence(*spec, *base, *steps);
      std::string out = "[";
      char buf[40];
      for (size_t i = 0; i < seq.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.17g", i ? ", " : "", seq[i]);
        out += buf;
      }
      out += "]\n";
      std::fputs(out.c_str(), stdout);
      return 0;
    };
  });
}

}  // namespace tscli
