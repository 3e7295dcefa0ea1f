// `trainstep train` and `trainstep eval` on an image dataset in IDX format.
#include <cstdio>

#include "commands.h"
#include "trainstep/error.h"
#include "data/idx.h"
#include "ir/program.h"
#include "train/trainer.h"

namespace tscli {

std::string data_dir(const std::string& spec) {
  if (spec == "fashion-mnist") return "/usr/share/datasets/fashion-mnist";
  if (spec.rfind("idx:", 0) == 0 && spec.size() > 4) return spec.substr(4);
  ts::fail("unknown --data '" + spec + "' (expected 'fashion-mnist' or 'idx:DIR')");
}

void add_session_flags(CLI::App* cmd, ts::SessionOptions& o) {
  cmd->add_option("--threads", o.threads, "compute threads (default: all cores)");
  auto off = [&](const char* flag, bool& field, const char* what) {
    cmd->add_flag_callback(flag, [&field] { field = false; }, what);
  };
  off("--no-fusion", o.compile.fusion, "disable fused kernels (plain path)");
  off("--no-inplace", o.compile.inplace, "write new state to fresh buffers, then copy");
  off("--no-cleanup", o.compile.cleanup, "skip DCE/CSE/folding/simplification");
}

namespace {

struct Common {
  std::string artifact, data = "fashion-mnist";
  ts::SessionOptions session;
};

void add_common(CLI::App* cmd, Common& c) {
  cmd->add_option("artifact", c.artifact, "NAME.tstep")->required();
  cmd->add_option("--data", c.data, "fashion-mnist or idx:DIR (MNIST-format IDX files)");
  add_session_flags(cmd, c.session);
}

void print_eval(const char* label, const ts::EvalResult& r) {
  std::printf("%s: loss %.4f, accuracy %.2f%% (%lld/%lld)\n", label, r.loss, 100 * r.accuracy,
              (long long)r.correct, (long long)r.count);
}

}  // namespace

void add_train(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("train", "Train an artifact on a dataset, epoch by epoch");
  auto c = std::make_shared<Common>();
  auto o = std::make_shared<ts::TrainOptions>();
  add_common(cmd, *c);
  cmd->add_option("--epochs", o->epochs, "epochs to run now (after --resume: more epochs)")
      ->check(CLI::PositiveNumber);
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
  cmd->add_option("--resume", o->resume, "checkpoint to continue from");
  cmd->add_option("--max-batches", o->max_batches, "stop each epoch after N batches (testing)");
  cmd->add_option("--accumulate", o->accumulate,
                  "average the gradients of N batches per optimizer step (artifact exported "
                  "with --grads)")
      ->check(CLI::PositiveNumber);
  cmd->callback([=, &action] {
    action = [=] {
      auto s = ts::Session::open(c->artifact, c->session);
      std::string dir = data_dir(c->data);
      ts::ImageDataset tr = ts::load_idx_split(dir, true), te = ts::load_idx_split(dir, false);
      std::printf("training %s: %lld train / %lld test samples, batch %lld\n",
                  s->program().name.c_str(), (long long)tr.n, (long long)te.n,
                  (long long)s->batch_size());
      ts::train(*s, tr, te, *o, [&](const ts::EpochReport& r) {
        std::printf(
            "epoch %lld: lr %.6g, train loss %.4f, test loss %.4f, test accuracy %.2f%%, "
            "%.1f samples/s, %.1f s\n",
            (long long)r.epoch, r.lr, r.train_loss, r.test.loss, 100 * r.test.accuracy,
            r.samples_per_s, r.seconds);
        std::fflush(stdout);
      });
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
  cmd->callback([=, &action] {
    action = [=] {
      auto s = ts::Session::open(c->artifact, c->session);
      if (!ckpt->empty()) s->load_checkpoint(*ckpt);
      ts::ImageDataset te = ts::load_idx_split(data_dir(c->data), false);
      print_eval("test", ts::evaluate(*s, te, 0.1307f, 0.3081f));
      return 0;
    };
  });
}

}  // namespace tscli
