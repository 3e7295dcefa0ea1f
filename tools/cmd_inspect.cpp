// `trainstep inspect ARTIFACT [--graph G.svg] [--memory M.svg]` and
// `trainstep ops [--json]`.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "commands.h"
#include "graph_svg.h"
#include "memory_svg.h"
#include "svg.h"
#include "trainstep/check.h"
#include "trainstep/inspect.h"

namespace tscli {

namespace {

// The optimizer, one line per param group; the raw JSON when it is not in
// the shape the exporter writes (older artifacts, hand-made ones).
std::string optimizer_summary(const ts::OptimizerSummary& opt) {
  if (!opt.structured) return "optimizer: " + opt.json + "\n";
  std::string s = "optimizer: " + opt.type + ", lr " + opt.lr + "\n";
  int gi = 0;
  for (const auto& g : opt.groups) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "  group %d: %zu params, %zu updated, lr x ", gi++, g.params,
                  g.updated);
    s += buf + g.lr_scale + ", " + g.options + "\n";
  }
  return s;
}

}  // namespace

void add_inspect(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("inspect", "Functions, signature, op histogram, state size");
  auto path = std::make_shared<std::string>();
  auto ir = std::make_shared<std::string>();
  auto sopts = std::make_shared<ts::SessionOptions>();
  cmd->add_option("artifact", *path, "NAME.tstep")->required();
  cmd->add_option("--ir", *ir,
                  "print FUNCTION (train_step, eval_step) as IR text after the compiler's passes "
                  "(as --no-fusion/--no-inplace/--no-cleanup leave them)");
  auto graph = std::make_shared<std::string>();
  auto memory = std::make_shared<std::string>();
  auto fn = std::make_shared<std::string>("train_step");
  cmd->add_option("--graph", *graph,
                  "draw the function (--function) after the compiler's passes, as the executor "
                  "runs it, as SVG: one box per node (op, output types), fused nodes coloured, a "
                  "fused elementwise group a cluster of its member ops")
      ->type_name("FILE");
  cmd->add_option("--memory", *memory,
                  "draw the function's memory plan as SVG: one box per arena buffer, x = node "
                  "index, y = arena offset (MiB), from its first write to its last read")
      ->type_name("FILE");
  cmd->add_option("--function", *fn, "the function --graph and --memory draw (default train_step)");
  add_session_flags(cmd, *sopts);
  add_examples(cmd, {"trainstep inspect mnist.tstep",
                    "trainstep inspect mnist.tstep --ir train_step",
                    "trainstep inspect mnist.tstep --graph graph.svg --memory memory.svg"});
  cmd->callback([=, &action] {
    action = [=] {
      const ts::Inspector a(*path);
      note_if_unchecked(*path, a.checksummed());
      if (!graph->empty() || !memory->empty()) {
        const ts::CompiledFunction f = a.compile(*fn, *sopts);
        if (!graph->empty()) {
          const ts::FunctionGraph g = f.graph();
          save(*graph, graph_svg(g));
          int fused = 0;
          for (const auto& n : g.nodes) fused += n.fusion != ts::Fusion::None;
          std::printf("graph: %s (%s after the compiler's passes: %zu nodes, %d fused)\n",
                      graph->c_str(), fn->c_str(), g.nodes.size(), fused);
        }
        if (!memory->empty()) {
          const ts::MemoryLayout plan = f.memory_plan();
          const MemoryPicture pic = memory_svg(plan);
          save(*memory, pic.svg);
          std::printf("memory: %s (%s: %d buffers, arena %s)\n", memory->c_str(), fn->c_str(),
                      pic.buffers, ts::bytes_str(plan.arena_bytes).c_str());
        }
        return 0;
      }
      if (!ir->empty()) {
        std::printf("%s", a.compile(*ir, *sopts).ir().c_str());
        return 0;
      }
      const ts::ArtifactSummary p = a.summary();
      std::printf("artifact %s: model %s, format version %d, batch %lld\n", path->c_str(),
                  p.model.c_str(), p.format_version, (long long)p.batch_size);
      if (!p.torch_version.empty() || !p.python_version.empty())
        std::printf("captured with torch %s, Python %s\n",
                    p.torch_version.empty() ? "?" : p.torch_version.c_str(),
                    p.python_version.empty() ? "?" : p.python_version.c_str());
      std::printf("%s", optimizer_summary(p.optimizer).c_str());
      for (const auto& [alias, target] : p.tied)
        std::printf("tied: %s is %s\n", alias.c_str(), target.c_str());
      auto count = p.state_numel;
      std::printf("parameters: %lld trainable", (long long)count["param"]);
      if (count["frozen"]) std::printf(", %lld frozen", (long long)count["frozen"]);
      std::printf("\nstate: %zu tensors, %.2f MiB (", p.state_tensors,
                  [&] { double t = 0; for (auto& [k, b] : p.state_bytes) t += b; return t; }() / 1048576.0);
      bool first = true;
      for (auto& [k, b] : p.state_bytes) {
        std::printf("%s%s %.2f MiB", first ? "" : ", ", k.c_str(), b / 1048576.0);
        first = false;
      }
      std::printf(")\n");
      for (const ts::FunctionSummary& f : p.functions) {
        std::printf("\nfunction %s: %zu inputs, %zu outputs, %zu nodes\n", f.name.c_str(),
                    f.inputs, f.outputs, f.nodes);
        std::printf("  inputs:");
        for (auto& [r, n] : f.input_roles) std::printf(" %s×%d", r.c_str(), n);
        std::printf("\n  outputs:");
        for (auto& [r, n] : f.output_roles) std::printf(" %s×%d", r.c_str(), n);
        // The ports `train --data` feeds from fields of these names (docs/data.md).
        for (const auto* ports : {&f.data_inputs, &f.data_targets}) {
          bool any = false;
          for (const ts::DataPort& in : *ports) {
            std::printf("%s %s %s%s", any ? "," : (ports == &f.data_inputs ? "\n  data inputs:" : "\n  data targets:"),
                        in.name.c_str(), in.type.c_str(),
                        in.batch_dim ? (" (batch dim " + std::to_string(in.batch_dim) + ")").c_str() : "");
            any = true;
          }
        }
        std::printf("\n  ops:\n");
        for (auto& [op, n] : f.ops) std::printf("    %5d  %s\n", n, op.c_str());
      }
      return 0;
    };
  });
}

void add_ops(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("ops", "List the supported ops");
  auto as_json = std::make_shared<bool>(false);
  auto device = std::make_shared<std::string>("cpu");
  cmd->add_flag("--json", *as_json, "machine-readable list (used by the exporter)");
  cmd->add_option("--device", *device,
                  "cuda: only the ops with CUDA kernels in this build (none in a build without "
                  "the CUDA backend)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  add_examples(cmd, {"trainstep ops | grep convolution", "trainstep ops --device cuda"});
  cmd->callback([=, &action] {
    action = [=] {
      const std::vector<ts::OpInfo> ops = ts::supported_ops(ts::parse_device(*device));
      if (*as_json) {
        // The exporter refuses a binary of another version (python/trainstep/versions.py).
        nlohmann::json j = {{"version", ts::program_format_version()},
                            {"trainstep_version", TRAINSTEP_VERSION},
                            {"ops", nlohmann::json::array()}};
        for (const auto& op : ops)
          j["ops"].push_back({{"name", op.name}, {"doc", op.doc}, {"bfloat16", op.bfloat16}});
        std::printf("%s\n", j.dump(1).c_str());
      } else {
        for (const auto& op : ops) std::printf("%-48s %s\n", op.name.c_str(), op.doc.c_str());
      }
      return 0;
    };
  });
}

}  // namespace tscli
