// `trainstep train` and `trainstep eval` on a dataset named by --data.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <utility>

#include "commands.h"
#include "progress.h"
#include "exit_codes.h"
#include "memory_size.h"
#include "trainstep/error.h"
#include "trainstep/dataset.h"
#include "trainstep/metrics_log.h"
#include "trainstep/train.h"

namespace tscli {

void add_session_flags(CLI::App* cmd, ts::SessionOptions& o) {
  cmd->add_option("--threads", o.threads, "compute threads (default: all cores)");
  auto off = [&](const char* flag, bool& field, const char* what) {
    cmd->add_flag_callback(flag, [&field] { field = false; }, what);
  };
  cmd->add_option_function<std::string>(
         "--device", [&o](const std::string& v) { o.device = ts::parse_device(v); },
         "where the steps run: cpu (default) or cuda (a build with the CUDA backend, and a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  off("--no-fusion", o.compile.fusion, "disable fused kernels (plain path)");
  off("--no-inplace", o.compile.inplace, "write new state to fresh buffers, then copy");
  off("--no-cleanup", o.compile.cleanup, "skip DCE/CSE/folding/simplification");
  cmd->add_option_function<std::string>(
         "--max-memory",
         [&o](const std::string& v) {
           try {
             o.max_memory = parse_memory_size(v);
           } catch (const ts::Error& e) {
             throw CLI::ValidationError("--max-memory", e.what());
           }
         },
         "bound on state + step arenas, e.g. 2G (default: physical memory)")
      ->type_name("SIZE");
  cmd->add_option_function<std::string>(
         "--on-nonfinite",
         [&o](const std::string& v) {
           o.on_nonfinite = v == "skip"  ? ts::NonFinite::Skip
                            : v == "off" ? ts::NonFinite::Ignore
                                         : ts::NonFinite::Stop;
         },
         "after each train step, if the loss or a new state tensor is NaN/inf: stop (default) "
         "fails naming the step and tensor; skip keeps the old state and counts the step; off "
         "does not check")
      ->check(CLI::IsMember({"stop", "skip", "off"}));
}

namespace {

struct Common {
  std::string artifact, data = "fashion-mnist", test_data;
  std::map<std::string, std::string> map;  // port -> field
  ts::SessionOptions session;
};

void add_common(CLI::App* cmd, Common& c) {
  cmd->add_option("artifact", c.artifact, "NAME.tstep")->required();
  cmd->add_option("--data", c.data, std::string("dataset: ") + ts::dataset_specs());
  cmd->add_option("--test-data", c.test_data,
                  "a separate test set, any --data spec, read whole (then --data is read whole "
                  "for training; default: --data's own test split)");
  cmd->add_option_function<std::vector<std::string>>(
         "--map",
         [&c](const std::vector<std::string>& pairs) {
           for (const std::string& p : pairs) {
             const size_t eq = p.find('=');
             if (eq == 0 || eq == std::string::npos || eq + 1 == p.size())
               throw CLI::ValidationError("--map", "'" + p + "' is not PORT=FIELD");
             c.map[p.substr(0, eq)] = p.substr(eq + 1);
           }
         },
         "feed port PORT from the data's field FIELD (repeatable; by default each port takes "
         "the field of its name: docs/data.md)")
      ->type_name("PORT=FIELD");
  add_session_flags(cmd, c.session);
}

// The train and test sets: --data split in two, or --data and --test-data whole.
std::pair<std::unique_ptr<ts::Dataset>, std::unique_ptr<ts::Dataset>> open_data(const Common& c) {
  if (c.test_data.empty())
    return {ts::open_dataset(c.data, ts::Split::Train), ts::open_dataset(c.data, ts::Split::Test)};
  return {ts::open_dataset(c.data, ts::Split::All), ts::open_dataset(c.test_data, ts::Split::All)};
}

void print_eval(const char* label, const ts::EvalResult& r) {
  if (r.has_perplexity)
    std::printf("%s: loss %.4f, perplexity %.2f, token accuracy %.2f%% (%lld/%lld)\n", label,
                r.loss, r.perplexity, 100 * r.accuracy, (long long)r.correct, (long long)r.labels);
  else if (r.has_accuracy)
    std::printf("%s: loss %.4f, accuracy %.2f%% (%lld/%lld)\n", label, r.loss, 100 * r.accuracy,
                (long long)r.correct, (long long)r.labels);
  else
    std::printf("%s: loss %.4f (%lld samples%s)\n", label, r.loss, (long long)r.count,
                r.left_out ? (", " + std::to_string(r.left_out) + " of a last partial batch left "
                              "out: the eval loss is per batch").c_str() : "");
}

}  // namespace

void add_train(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("train", "Train an artifact on a dataset, epoch by epoch");
  auto c = std::make_shared<Common>();
  auto o = std::make_shared<ts::TrainOptions>();
  auto log_dir = std::make_shared<std::string>();
  auto dist = std::make_shared<Distributed>();
  add_common(cmd, *c);
  add_distributed(cmd, *dist);
  cmd->add_option("--epochs", o->epochs, "epochs to run now (after --resume: more epochs)")
      ->check(at_least(1));
  cmd->add_option("--lr", o->lr, "base learning rate (default: the optimizer's)");
  cmd->add_option("--lr-schedule", o->lr_schedule,
                  "constant | step:S:G | multistep:M1,M2,...:G | exp:G | cosine:T_MAX[:ETA_MIN] | "
                  "linear:START:END:ITERS | onecycle:MAX_LR:TOTAL[:PCT[:DIV[:FINAL_DIV[:cos|linear]]]] | "
                  "seq:SPEC1|SPEC2:MILESTONE (default: the checkpoint's, else constant)");
  cmd->add_option("--lr-schedule-unit", o->lr_schedule_unit,
                  "epoch (default) | step: step the schedule once per epoch or per training step")
      ->check(CLI::IsMember({"epoch", "step"}));
  cmd->add_option("--seed", o->seed, "seed for data order and dropout");
  cmd->add_option("--save", o->save, "checkpoint written after every epoch");
  cmd->add_option("--resume", o->resume,
                  "checkpoint to continue from, or 'auto': the newest valid one in the checkpoint "
                  "folder or --save (then --epochs is the run's total)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every,
                  "also write a checkpoint every N steps into the checkpoint folder")
      ->check(at_least(0));
  cmd->add_option("--checkpoint-dir", o->checkpoint_dir,
                  "checkpoint folder (default: next to --save: out/m.ckpt -> out/m.checkpoints)");
  cmd->add_option("--keep", o->keep, "periodic checkpoints to keep (default 3)")
      ->check(at_least(1));
  cmd->add_option("--max-batches", o->max_batches, "stop each epoch after N batches (testing)");
  cmd->add_option("--data-threads", o->data_threads,
                  "threads reading batches ahead of the step (default 1; they share the cores "
                  "with --threads)")
      ->check(at_least(1));
  cmd->add_option("--accumulate", o->accumulate,
                  "average the gradients of N batches per optimizer step (default 1; a resumed "
                  "checkpoint's N must be given again)")
      ->check(at_least(1));
  cmd->add_option("--log-dir", *log_dir,
                  "write TensorBoard event files and metrics.jsonl (one JSON object a line) "
                  "into DIR as the run goes: losses, LR, test loss and accuracy, samples/s, "
                  "step time. Example: --log-dir runs/mnist, then: tensorboard --logdir runs")
      ->type_name("DIR");
  add_examples(cmd, {"trainstep train mnist.tstep --data fashion-mnist --epochs 3 --save out/mnist.ckpt",
                    "trainstep train mnist.tstep --data fashion-mnist --log-dir runs/mnist, then "
                    "trainstep plot runs/mnist"});
  cmd->callback([=, &action] {
    action = [=] {
      ts::SessionOptions so = c->session;
      so.grad_steps = o->accumulate > 1;
      start_distributed(*dist, so);
      auto s = ts::Session::open(c->artifact, so);
      // Data-parallel: rank 0 speaks for the run; errors name their rank.
      const bool lead = s->rank() == 0;
      if (lead) note_if_unchecked(c->artifact, s->artifact_checksummed());
      auto [tr, te] = open_data(*c);
      if (lead && s->world_size() > 1)
        std::printf("data-parallel over %d ranks (MPI): batch %lld per rank, %lld per step\n",
                    s->world_size(), (long long)s->batch_size(),
                    (long long)s->batch_size() * s->world_size());
      if (lead && s->shards_optimizer()) std::printf("%s\n", s->shard_description().c_str());
      if (lead)
        std::printf("training %s: %lld train / %lld test samples (%s), batch %lld\n",
                    s->model_name().c_str(), (long long)tr->size(), (long long)te->size(),
                    tr->describe().c_str(), (long long)s->batch_size());
      ts::TrainOptions opts = *o;
      opts.map = c->map;
      opts.stop = &ts::install_stop_signals();
      ts::ObserverList observers;
      TrainOutput out(isatty(fileno(stderr)));
      observers.all.push_back(&out);
      std::unique_ptr<ts::MetricsLog> log;  // opened first: a bad folder fails before training
      if (!log_dir->empty()) {
        log = std::make_unique<ts::MetricsLog>(*log_dir);
        observers.all.push_back(log.get());
      }
      ts::TrainResult res;
      try {
        res = ts::train(*s, *tr, *te, opts, &observers);
      } catch (const ts::Error& e) {
        if (s->world_size() == 1) throw;
        throw ts::Error("rank " + std::to_string(s->rank()) + " of " +
                        std::to_string(s->world_size()) + ": " + e.what());
      }
      out.end_line();
      if (!lead) return res.stopped_by ? exit_code::kSignalBase + res.stopped_by : 0;
      if (res.stopped_by) {
        const char* name = res.stopped_by == SIGINT ? "SIGINT" : res.stopped_by == SIGTERM ? "SIGTERM" : "a signal";
        if (res.checkpoint.empty())
          std::printf("interrupted by %s after step %lld; no checkpoint written (no --save or "
                      "--checkpoint-dir)\n", name, (long long)s->step());
        else
          std::printf("interrupted by %s after step %lld; checkpoint: %s (continue with --resume auto)\n",
                      name, (long long)s->step(), res.checkpoint.c_str());
        std::fflush(stdout);
        return exit_code::kSignalBase + res.stopped_by;
      }
      if (res.skipped_steps)
        std::printf("non-finite steps skipped: %lld of %lld\n", (long long)res.skipped_steps,
                    (long long)s->step());
      if (!o->save.empty()) std::printf("checkpoint: %s\n", o->save.c_str());
      return 0;
    };
  });
}

void add_eval(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("eval", "Evaluate on the test split (every sample counts)");
  auto c = std::make_shared<Common>();
  auto ckpt = std::make_shared<std::string>();
  add_common(cmd, *c);
  cmd->add_option("--checkpoint", *ckpt, "checkpoint to evaluate (default: initial state)");
  add_example(cmd, "trainstep eval mnist.tstep --data fashion-mnist --checkpoint out/mnist.ckpt");
  cmd->callback([=, &action] {
    action = [=] {
      auto s = ts::Session::open(c->artifact, c->session);
      note_if_unchecked(c->artifact, s->artifact_checksummed());
      if (!ckpt->empty()) note_if_unchecked(*ckpt, s->load_checkpoint(*ckpt).checksummed);
      auto te = ts::open_dataset(c->test_data.empty() ? c->data : c->test_data,
                                 c->test_data.empty() ? ts::Split::Test : ts::Split::All);
      print_eval("test", ts::evaluate(*s, *te, c->map));
      return 0;
    };
  });
}

}  // namespace tscli
