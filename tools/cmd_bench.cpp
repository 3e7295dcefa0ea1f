// `trainstep bench ARTIFACT`: times train_step on the artifact's golden batch
// (or, with --accumulate N, N grad_steps and one apply_grads).
// Prints the train_step memory plan, then the timings. Final line:
// step_ms_median=<x>. --profile adds time per op and the share
// of the step spent outside the kernels.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "commands.h"
#include "trainstep/bench.h"
#include "trainstep/cpu.h"
#include "trainstep/session.h"

namespace tscli {

namespace {

// A profile row's name: the op, or with by_shape the op and its first
// output's type (a product's transposition flags too), since one op's
// nodes of different shapes often cost very different amounts.
std::string row_name(const ts::NodeProfile& n, bool by_shape) {
  if (!by_shape || n.output_type.empty()) return n.op;
  std::string s = n.op + " " + n.output_type;
  if (n.trans_a) s += " trans_a";
  if (n.trans_b) s += " trans_b";
  return s;
}

void print_profile(const std::vector<ts::NodeProfile>& profile, int steps, double total_s,
                   bool by_shape) {
  struct Row {
    double s = 0, layout = 0;
    int nodes = 0;
  };
  std::map<std::string, Row> by_op;
  double kernels = 0, copies = 0, layout = 0;
  for (const auto& t : profile) {
    Row& r = by_op[row_name(t, by_shape)];
    r.s += t.seconds;
    r.layout += t.layout_seconds;
    r.nodes += 1;
    kernels += t.seconds;
    layout += t.layout_seconds;
    if (t.data_movement) copies += t.seconds;
  }
  std::vector<std::pair<double, std::string>> rows;
  for (auto& [op, r] : by_op) rows.push_back({r.s, op});
  std::sort(rows.rbegin(), rows.rend());
  int width = 44;
  for (auto& [s, op] : rows) width = std::max(width, static_cast<int>(op.size()));
  std::printf("\n%-*s %6s %10s %7s %12s\n", width, by_shape ? "op and output" : "op", "nodes",
              "ms/step", "share", "of which reorders");
  for (auto& [s, op] : rows) {
    const Row& r = by_op[op];
    std::printf("%-*s %6d %10.3f %6.1f%%", width, op.c_str(), r.nodes, 1e3 * s / steps,
                100 * s / total_s);
    if (r.layout > 0) std::printf(" %10.3f", 1e3 * r.layout / steps);
    std::printf("\n");
  }
  const double dispatch = total_s - kernels;
  const double outside = dispatch + copies + layout;
  std::printf("\ncompute kernels %.3f ms/step; layout reorders %.3f; copy kernels %.3f; "
              "dispatch and the rest %.3f\n",
              1e3 * (kernels - copies - layout) / steps, 1e3 * layout / steps, 1e3 * copies / steps,
              1e3 * dispatch / steps);
  std::printf("outside compute kernels: %.1f%% of the step\n", 100 * outside / total_s);
}

// Where an op had several implementations, which one each shape got and
// what the candidates measured when it was compiled (or that the pick came
// from the cache, or was forced).
void print_kernel_choices(const std::vector<ts::KernelPick>& picks) {
  if (picks.empty()) return;
  const std::string cache = ts::kernel_choice_cache_path();
  std::printf("\nkernels chosen by measurement (cache: %s):\n",
              cache.empty() ? "none" : cache.c_str());
  for (const ts::KernelPick& p : picks)
    std::printf("  %-36s %4d node%s  %s\n", p.key.c_str(), p.nodes, p.nodes == 1 ? " " : "s",
                p.choice.c_str());
}

// The collectives' share of a data-parallel step: their time on the MPI
// thread, and the part the step waited for (the wait nodes); the rest was
// hidden behind the backward (and, sharded, behind the update).
void print_all_reduce(const ts::AllReduceStats& a, int ranks, int steps, bool sharded) {
  const double reduce = a.reduce_seconds, waits = a.wait_seconds;
  std::printf("\n%s: %d bucket(s), %.2f MiB a step over %d ranks; %.3f ms/step reducing, "
              "%.3f ms/step waited for: %.1f%% hidden behind the backward\n",
              sharded ? "gradients and parameters (--shard-optimizer)" : "all-reduce", a.buckets,
              a.bytes / 1048576.0, ranks, 1e3 * reduce / steps, 1e3 * waits / steps,
              reduce > 0 ? 100 * std::max(0.0, 1 - waits / reduce) : 0.0);
}

}  // namespace

void add_bench(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("bench", "Time train_step on the artifact's golden batch");
  auto path = std::make_shared<std::string>();
  auto steps = std::make_shared<int>(50);
  auto warmup = std::make_shared<int>(5);
  auto sopts = std::make_shared<ts::SessionOptions>();
  auto profile = std::make_shared<bool>(false);
  auto by_shape = std::make_shared<bool>(false);
  auto accumulate = std::make_shared<int>(0);
  auto dist = std::make_shared<Distributed>();
  cmd->add_option("artifact", *path, "NAME.tstep")->required();
  add_distributed(cmd, *dist);
  cmd->add_option("--accumulate", *accumulate,
                  "time a step of N grad_steps + apply_grads instead")
      ->check(at_least(1));
  cmd->add_option("--steps", *steps, "timed steps")->check(at_least(1));
  cmd->add_option("--warmup", *warmup, "untimed steps first");
  add_session_flags(cmd, *sopts);
  cmd->add_flag("--profile", *profile, "time per op; share outside compute kernels");
  cmd->add_flag("--by-shape", *by_shape,
                "with --profile: a row per op and output shape (and a product's transposition)")
      ->needs("--profile");
  add_examples(cmd, {"trainstep bench mnist.tstep --steps 100 --profile",
                    "trainstep bench mnist.tstep --device cuda --steps 200"});
  cmd->callback([=, &action] {
    action = [=] {
      using clock = std::chrono::steady_clock;
      ts::SessionOptions so = *sopts;
      so.grad_steps = *accumulate > 0;
      start_distributed(*dist, so);
      auto t0 = clock::now();
      auto s = ts::Session::open(*path, so);
      // Data-parallel: every rank steps on the golden batch; rank 0 reports.
      const bool lead = s->rank() == 0;
      if (lead) note_if_unchecked(*path, s->artifact_checksummed());
      double compile_s = std::chrono::duration<double>(clock::now() - t0).count();
      ts::BenchOptions bo;
      bo.steps = *steps;
      bo.warmup = *warmup;
      bo.accumulate = *accumulate;
      bo.profile = *profile;
      const ts::BenchReport r = ts::bench(*s, bo);
      if (so.device != ts::Device::Cpu) {
        std::printf("device: %s; train_step: %s\n", s->device_description().c_str(),
                    s->train_step_description().c_str());
      } else {
        if (lead) std::printf("%s\n", ts::train_memory_summary(*s).c_str());
        const std::string shards = ts::shard_memory_summary(*s);  // every rank takes part
        if (lead && !shards.empty()) std::printf("%s\n", shards.c_str());
        if (lead) std::printf("kernels: %s (this CPU: %s; TRAINSTEP_ISA forces a lower level)\n",
                    ts::cpu_isa_name(ts::cpu_isa()), ts::cpu_isa_name(ts::detected_cpu_isa()));
      }
      const std::vector<double>& ms = r.step_ms;
      const double total = r.total_seconds;
      if (!lead) return 0;
      auto pct = [&](double p) { return ms[std::min(ms.size() - 1, size_t(p * ms.size()))]; };
      std::printf("%s: load+compile %.3f s, %d steps (batch %lld%s): min %.2f ms, p10 %.2f, "
                  "median %.2f, p90 %.2f, max %.2f; %.1f samples/s\n",
                  path->c_str(), compile_s, *steps, (long long)s->batch_size(),
                  s->world_size() > 1 ? (" x " + std::to_string(s->world_size()) + " ranks").c_str() : "",
                  ms.front(), pct(0.1), pct(0.5), pct(0.9), ms.back(),
                  s->batch_size() * s->world_size() * 1e3 / pct(0.5));
      if (*profile && so.device != ts::Device::Cpu) {
        print_profile(r.profile, *steps, total, *by_shape);
        std::printf("(profiled kernel by kernel with device events, without the step's CUDA "
                    "graph: the dispatch share is larger than in a plain run)\n");
      } else if (*profile) {
        print_profile(r.profile, *steps, total, *by_shape);
        print_kernel_choices(ts::kernel_picks(*s));
        if (s->world_size() > 1 && *accumulate == 0)
          print_all_reduce(ts::all_reduce_stats(*s), s->world_size(), *steps,
                           s->shards_optimizer());
        std::printf("%s", ts::train_memory_peak(*s).c_str());
      }
      std::printf("step_ms_median=%.3f\n", pct(0.5));
      return 0;
    };
  });
}

}  // namespace tscli
