// `trainstep inspect ARTIFACT [--graph G.svg] [--memory M.svg]` and
// `trainstep ops [--json]`.
#include <cstdio>
#include <map>

#include "commands.h"
#include "graph_svg.h"
#include "ir/program.h"
#include "runtime/device.h"
#include "ir/text.h"
#include "passes/pipeline.h"
#include "memory_svg.h"
#include "runtime/artifact.h"
#include "runtime/memory_plan.h"
#include "svg.h"

namespace tscli {

namespace {

// The optimizer, one line per param group; the raw JSON when it is not in
// the shape the exporter writes (older artifacts, hand-made ones).
std::string optimizer_summary(const ts::json& opt) {
  try {
    if (!opt.contains("groups")) return "optimizer: " + opt.dump() + "\n";
    std::string s = "optimizer: " + opt.at("type").get<std::string>() + ", lr " +
                    opt.at("lr").dump() + "\n";
    int gi = 0;
    for (const auto& g : opt.at("groups")) {
      ts::json o = g.at("options");
      o.erase("lr");
      char buf[128];
      std::snprintf(buf, sizeof buf, "  group %d: %zu params, %zu updated, lr x ", gi++,
                    g.at("params").size(), g.at("updated").size());
      s += buf + g.at("lr_scale").dump() + ", " + o.dump() + "\n";
    }
    return s;
  } catch (const ts::json::exception&) {
    return "optimizer: " + opt.dump() + "\n";
  }
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
      ts::Artifact a = ts::load_artifact(*path);
      note_if_unchecked(*path, a.tensors.checksummed);
      const ts::Program& p = a.program;
      if (!graph->empty() || !memory->empty()) {
        ts::Function f = p.function(*fn);
        ts::optimize(f, sopts->compile, sopts->device);
        if (!graph->empty()) {
          save(*graph, graph_svg(f));
          int fused = 0;
          for (const auto& n : f.nodes) fused += fusion_of(n) != Fusion::None;
          std::printf("graph: %s (%s after the compiler's passes: %zu nodes, %d fused)\n",
                      graph->c_str(), fn->c_str(), f.nodes.size(), fused);
        }
        if (!memory->empty()) {
          // As a session plans it by default (new state donated to the old buffers).
          const ts::MemoryPlan plan = ts::plan_memory(f, sopts->compile.inplace, true);
          const MemoryPicture pic = memory_svg(f, plan);
          save(*memory, pic.svg);
          std::printf("memory: %s (%s: %d buffers, arena %s)\n", memory->c_str(), fn->c_str(),
                      pic.buffers, ts::bytes_str(plan.arena_bytes).c_str());
        }
        return 0;
      }
      if (!ir->empty()) {
        ts::Function f = p.function(*ir);
        ts::optimize(f, sopts->compile, sopts->device);
        std::printf("%s", ts::print_function(f).c_str());
        return 0;
      }
      std::printf("artifact %s: model %s, format version %d, batch %lld\n", path->c_str(),
                  p.name.c_str(), p.version, (long long)p.batch_size);
      if (!p.torch_version.empty() || !p.python_version.empty())
        std::printf("captured with torch %s, Python %s\n",
                    p.torch_version.empty() ? "?" : p.torch_version.c_str(),
                    p.python_version.empty() ? "?" : p.python_version.c_str());
      std::printf("%s", optimizer_summary(p.optimizer).c_str());
      for (const auto& [alias, target] : p.aliases)
        std::printf("tied: %s is %s\n", alias.c_str(), target.c_str());
      std::map<std::string, int64_t> count, bytes;
      for (const auto& s : p.state) {
        count[s.kind] += s.type.numel();
        bytes[s.kind] += s.type.nbytes();
      }
      std::printf("parameters: %lld trainable", (long long)count["param"]);
      if (count["frozen"]) std::printf(", %lld frozen", (long long)count["frozen"]);
      std::printf("\nstate: %zu tensors, %.2f MiB (", p.state.size(),
                  [&] { double t = 0; for (auto& [k, b] : bytes) t += b; return t; }() / 1048576.0);
      bool first = true;
      for (auto& [k, b] : bytes) {
        std::printf("%s%s %.2f MiB", first ? "" : ", ", k.c_str(), b / 1048576.0);
        first = false;
      }
      std::printf(")\n");
      for (const auto& [name, f] : p.functions) {
        std::printf("\nfunction %s: %zu inputs, %zu outputs, %zu nodes\n", name.c_str(),
                    f.inputs.size(), f.outputs.size(), f.nodes.size());
        std::map<std::string, int> roles_in, roles_out;
        for (const auto& in : f.inputs) roles_in[ts::role_name(in.role)]++;
        for (const auto& o : f.outputs) roles_out[ts::role_name(o.role)]++;
        std::printf("  inputs:");
        for (auto& [r, n] : roles_in) std::printf(" %s×%d", r.c_str(), n);
        std::printf("\n  outputs:");
        for (auto& [r, n] : roles_out) std::printf(" %s×%d", r.c_str(), n);
        // The ports `train --data` feeds from fields of these names (docs/data.md).
        for (ts::Role role : {ts::Role::Input, ts::Role::Target}) {
          bool any = false;
          for (const auto& in : f.inputs) {
            if (in.role != role) continue;
            std::printf("%s %s %s%s", any ? "," : (role == ts::Role::Input ? "\n  data inputs:" : "\n  data targets:"),
                        in.name.c_str(), in.type.str().c_str(),
                        in.batch_dim ? (" (batch dim " + std::to_string(in.batch_dim) + ")").c_str() : "");
            any = true;
          }
        }
        std::printf("\n  ops:\n");
        std::map<std::string, int> hist;
        for (const auto& n : f.nodes) hist[n.op]++;
        std::vector<std::pair<int, std::string>> sorted;
        for (auto& [op, n] : hist) sorted.push_back({-n, op});
        std::sort(sorted.begin(), sorted.end());
        for (auto& [n, op] : sorted) std::printf("    %5d  %s\n", -n, op.c_str());
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
      std::vector<ts::OpDef> ops;
      const ts::Device d = ts::parse_device(*device);
      const std::vector<std::string> on_device = ts::device_kernel_ops(d);
      for (const auto& op : ts::OpRegistry::get().all())
        if (d == ts::Device::Cpu ||
            std::find(on_device.begin(), on_device.end(), op.name) != on_device.end())
          ops.push_back({op.name, op.doc});
      if (*as_json) {
        // The exporter refuses a binary of another version (python/trainstep/versions.py).
        ts::json j = {{"version", ts::kFormatVersion},
                      {"trainstep_version", TRAINSTEP_VERSION},
                      {"ops", ts::json::array()}};
        for (const auto& op : ops) j["ops"].push_back({{"name", op.name}, {"doc", op.doc}});
        std::printf("%s\n", j.dump(1).c_str());
      } else {
        for (const auto& op : ops) std::printf("%-48s %s\n", op.name.c_str(), op.doc.c_str());
      }
      return 0;
    };
  });
}

}  // namespace tscli
