#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "data/batcher.h"
#include "data/prefetcher.h"
#include "ir/program.h"

namespace ts {

namespace {

// A prefetcher shaped like `fn`'s model input and target.
std::unique_ptr<Prefetcher> prefetcher(const Session& s, const char* fn, const Batcher& data) {
  const Function& f = s.program().function(fn);
  int xi = f.find_input("input"), yi = f.find_input("target");
  if (xi < 0 || yi < 0) fail(std::string(fn) + " has no model input or target");
  data.check(f.inputs[xi].type, f.inputs[yi].type);
  return std::make_unique<Prefetcher>(data, f.inputs[xi].type, f.inputs[yi].type);
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

EvalResult evaluate(Session& s, const Dataset& test) {
  Batcher data(test, s.batch_size());
  auto pf = prefetcher(s, "eval_step", data);
  pf->start(0, data.padded_batches());
  EvalResult r;
  // Integer targets are class labels (one per target element, e.g. one per
  // token for a language model): accuracy is argmax over the output's last
  // dim. Float targets (regression) have no accuracy.
  const Function& f = s.program().function("eval_step");
  const TensorType& yt = f.inputs[f.find_input("target")].type;
  r.has_accuracy = yt.dtype == DType::I64;
  const int64_t labels_per_row = yt.numel() / s.batch_size();
  double loss_sum = 0;
  for (int64_t b = 0; b < data.padded_batches(); ++b) {
    pf->next();
    const int64_t real = pf->real();
    s.eval_step({pf->x().view}, pf->y().view);
    const float* sl = s.eval_sample_loss().as<float>();
    for (int64_t i = 0; i < real; ++i) loss_sum += sl[i];
    r.count += real;
    if (!r.has_accuracy) continue;
    const Tensor& out = s.eval_output();
    const int64_t* labels = pf->y().view.as<int64_t>();
    const int64_t classes = out.numel() / yt.numel();
    const float* o = out.as<float>();
    for (int64_t k = 0; k < real * labels_per_row; ++k) {
      const float* row = o + k * classes;
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (row[c] > row[best]) best = c;
      r.correct += best == labels[k];
    }
    r.labels += real * labels_per_row;
  }
  r.loss = r.count ? loss_sum / r.count : 0;
  r.accuracy = r.labels ? static_cast<double>(r.correct) / r.labels : 0;
  return r;
}

void train(Session& s, const Dataset& train_set, const Dataset& test_set,
           const TrainOptions& o, const std::function<void(const EpochReport&)>& on_epoch) {
  int64_t first_epoch = 0;
  double base_lr = o.lr >= 0 ? o.lr : s.lr();
  std::string schedule_spec = o.lr_schedule;
  std::string unit = o.lr_schedule_unit;
  int64_t seed = o.seed;
  if (!o.resume.empty()) {
    auto meta = s.load_checkpoint(o.resume);
    auto get = [&](const char* k) {
      auto it = meta.find(k);
      if (it == meta.end()) fail(o.resume + ": checkpoint metadata lacks '" + k + "'");
      return it->second;
    };
    try {
      first_epoch = std::stoll(get("epoch"));
      if (o.lr < 0) base_lr = std::stod(get("base_lr"));
    } catch (const std::logic_error&) {
      fail(o.resume + ": checkpoint metadata has a malformed epoch or base_lr");
    }
    if (schedule_spec.empty()) schedule_spec = get("lr_schedule");
    // Checkpoints from before per-step schedules have no unit: they were per epoch.
    if (unit.empty()) unit = meta.count("lr_schedule_unit") ? meta["lr_schedule_unit"] : "epoch";
    seed = s.seed();
  }
  s.set_seed(seed);
  if (unit.empty()) unit = "epoch";
  if (unit != "epoch" && unit != "step")
    fail("bad LR schedule unit '" + unit + "' (expected 'epoch' or 'step')");
  const bool per_step = unit == "step";
  LrSchedule sched = LrSchedule::parse(schedule_spec);
  // Per step, the schedule index is the session's global step (kept in
  // checkpoints), so a resume continues the sequence where it stopped.
  LrSchedule::Cursor cursor(sched, base_lr);
  Batcher data(train_set, s.batch_size());
  auto pf = prefetcher(s, "train_step", data);
  int64_t nb = data.full_batches();
  if (o.max_batches > 0 && o.max_batches < nb) nb = o.max_batches;
  if (nb == 0) fail("the training set has fewer samples than one batch");
  const int64_t accum = o.accumulate;
  if (accum < 1) fail("--accumulate must be at least 1");
  if (accum > 1) {
    if (!s.has_grad_functions())
      fail("--accumulate needs an artifact exported with --grads (" + s.program().name +
           " has no grad_step)");
    if (nb < accum)
      fail("--accumulate " + std::to_string(accum) + ": an epoch has only " + std::to_string(nb) +
           " batches");
    nb -= nb % accum;  // whole optimizer steps only
    s.set_accumulation(accum);
  }
  const bool tty = isatty(fileno(stderr));

  for (int64_t e = first_epoch; e < first_epoch + o.epochs; ++e) {
    EpochReport rep;
    rep.epoch = e + 1;
    if (per_step) {
      cursor.advance_to(s.step());
      rep.lr = cursor.lr();
    } else {
      rep.lr = sched.at_epoch(base_lr, e);
    }
    s.set_lr(rep.lr);
    data.shuffle(static_cast<uint64_t>(seed), e);
    pf->start(0, nb);
    auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    for (int64_t b = 0; b < nb; ++b) {
      pf->next();
      if (per_step) {
        cursor.advance_to(s.step());
        s.set_lr(cursor.lr());
      }
      float loss;
      if (accum == 1) {
        loss = s.train_step({pf->x().view}, pf->y().view);
      } else {
        loss = s.grad_step({pf->x().view}, pf->y().view);
        if ((b + 1) % accum == 0) s.apply_grads();
      }
      if (!std::isfinite(loss))
        fail("epoch " + std::to_string(e + 1) + ", step " +
             std::to_string(s.step() - (accum == 1 || (b + 1) % accum == 0)) +
             ": the loss is not finite (" + fmt("%g", loss) + ")");
      loss_sum += loss;
      const int64_t every = tty ? 20 : std::max<int64_t>(1, nb / 10);
      if (o.progress && ((b + 1) % every == 0 || b + 1 == nb)) {
        std::fprintf(stderr, "%sepoch %lld [%lld/%lld] loss %.4f%s", tty ? "\r" : "",
                     (long long)(e + 1), (long long)((b + 1) * s.batch_size()),
                     (long long)(nb * s.batch_size()), loss_sum / (b + 1), tty ? "" : "\n");
        std::fflush(stderr);
      }
    }
    if (o.progress && tty) std::fprintf(stderr, "\n");
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rep.train_loss = loss_sum / nb;
    rep.samples_per_s = nb * s.batch_size() / rep.seconds;
    rep.test = evaluate(s, test_set);
    if (!o.save.empty())
      s.save_checkpoint(o.save, {{"epoch", std::to_string(e + 1)},
                                 {"base_lr", fmt("%.17g", base_lr)},
                                 {"lr_schedule", sched.spec()},
                                 {"lr_schedule_unit", unit},
                                 {"data_position", "0"}});
    on_epoch(rep);
  }
}

}  // namespace ts
