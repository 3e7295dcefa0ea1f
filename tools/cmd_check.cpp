// `trainstep check FILE [--artifact ART]`: checks an artifact or checkpoint
// without running it (container, checksums, program or checkpoint
// metadata), and prints the one-line notice for files without checksums.
#include <cstdio>

#include "commands.h"
#include "io/checksum.h"
#include "io/safetensors.h"
#include "runtime/artifact.h"
#include "runtime/formats.h"
#include "runtime/memory_plan.h"
#include "trainstep/train.h"
#include "trainstep/error.h"

namespace tscli {

namespace {

std::string meta_of(const ts::SafeTensors& st, const char* key) {
  auto it = st.metadata.find(key);
  return it == st.metadata.end() ? std::string() : it->second;
}

size_t data_bytes(const ts::SafeTensors& st) {
  size_t n = 0;
  for (const auto& [name, t] : st.tensors) n += t.view.nbytes();
  return n;
}

std::string integrity(const ts::SafeTensors& st) {
  return st.checksummed ? std::string("checksums OK (") + ts::kChecksumAlgorithm + ")"
                        : std::string("no checksums");
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
      ts::SafeTensors st = ts::read_safetensors(*path);
      const std::string format = meta_of(st, "format");
      const bool checksummed = st.checksummed;
      const std::string sizes = std::to_string(st.tensors.size()) + " tensors (" +
                                ts::bytes_str(data_bytes(st)) + ")";
      if (format == ts::kArtifactFormat) {
        const std::string what = integrity(st);
        ts::Artifact a = ts::load_artifact(*path, std::move(st));
        std::printf("%s: artifact of model '%s', %zu functions, %s: %s, program verified\n",
                    path->c_str(), a.program.name.c_str(), a.program.functions.size(),
                    sizes.c_str(), what.c_str());
      } else if (format == ts::kCheckpointFormat) {
        const ts::CheckpointMeta m = ts::parse_checkpoint_metadata(st.metadata, *path);
        const std::string where =
            m.run ? " (epoch " + std::to_string(ts::resume_position(m, *path).epoch) + ")"
                  : " (saved outside train)";
        const std::string head = *path + ": checkpoint of model '" + m.model + "' at step " +
                                 std::to_string(m.step) + where + ", " + sizes + ": " +
                                 integrity(st);
        std::string fits;
        if (!art->empty()) {
          auto s = ts::Session::open(*art);
          s->load_checkpoint(*path, std::move(st));  // the file is read once
          fits = ", fits " + *art;
        }
        std::printf("%s%s\n", head.c_str(), fits.c_str());
      } else {
        ts::fail(*path + ": not a trainstep artifact or checkpoint (its format is '" + format +
                 "'; " + integrity(st) + ")");
      }
      note_if_unchecked(*path, checksummed);
      return 0;
    };
  });
}

}  // namespace tscli
