// `trainstep check FILE [--artifact ART]`: checks an artifact or checkpoint
// without running it (container, checksums, program or checkpoint
// metadata), and prints the one-line notice for files without checksums.
#include <cstdio>

#include "commands.h"
#include "trainstep/check.h"

namespace tscli {

namespace {

std::string integrity(const ts::CheckReport& r) {
  return r.checksummed ? "checksums OK (" + r.checksum_algorithm + ")" : std::string("no checksums");
}

}  // namespace

void note_if_unchecked(const std::string& path, bool checksummed) {
  if (!checksummed) std::fprintf(stderr, "%s\n", ts::unchecked_notice(path).c_str());
}

void add_check(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "check", "Check an artifact or checkpoint without running it (structure, checksums, program)");
  auto path = std::make_shared<std::string>();
  auto art = std::make_shared<std::string>();
  cmd->add_option("file", *path, "NAME.tstep or a checkpoint")->required();
  cmd->add_option("--artifact", *art,
                  "for a checkpoint: also check that it fits this artifact (names, dtypes, shapes)");
  add_examples(cmd, {"trainstep check mnist.tstep",
                    "trainstep check out/mnist.ckpt --artifact mnist.tstep"});
  cmd->callback([=, &action] {
    action = [=] {
      const ts::CheckReport r = ts::check_file(*path, *art);
      const std::string sizes = std::to_string(r.tensors) + " tensors (" +
                                ts::bytes_str(r.tensor_bytes) + ")";
      if (r.kind == ts::FileKind::Artifact) {
        std::printf("%s: artifact of model '%s', %zu functions, %s: %s, program verified\n",
                    path->c_str(), r.model.c_str(), r.functions, sizes.c_str(),
                    integrity(r).c_str());
      } else {
        const std::string where =
            r.epoch ? " (epoch " + std::to_string(*r.epoch) + ")" : " (saved outside train)";
        const std::string fits = art->empty() ? "" : ", fits " + *art;
        std::printf("%s: checkpoint of model '%s' at step %s%s, %s: %s%s\n", path->c_str(),
                    r.model.c_str(), std::to_string(r.step).c_str(), where.c_str(),
                    sizes.c_str(), integrity(r).c_str(), fits.c_str());
      }
      note_if_unchecked(*path, r.checksummed);
      return 0;
    };
  });
}

}  // namespace tscli
