#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "data/batcher.h"
#include "data/prefetcher.h"
#include "io/checksum.h"
#include "io/safetensors.h"
#include "ir/program.h"
#include "train/checkpoints.h"

namespace ts {

namespace {

// A prefetcher shaped like `fn`'s model input and target.
std::unique_ptr<Prefetcher> prefetcher(const Session& s, const char* fn, const Batcher& data) {
  const Function& f = s.program().function(fn);
  int xi = f.find_input(Role::Input), yi = f.find_input(Role::Target);
  if (xi < 0 || yi < 0) fail(std::string(fn) + " has no model input or target");
  // The datasets hand over one image or token tensor per sample; a model
  // taking several input tensors (a dict batch) is fed through the API.
  std::string names;
  int n_in = 0;
  for (const Port& p : f.inputs)
    if (p.role == Role::Input) names += (n_in++ ? ", " : "") + p.name;
  if (n_in != 1)
    fail(std::string(fn) + " takes " + std::to_string(n_in) + " model input tensors (" + names +
         "), and the datasets feed one; feed such a step through the C++ API "
         "(Session::train_step with one tensor per input port)");
  const Port& x = f.inputs[xi];
  const Port& y = f.inputs[yi];
  data.check(batch_major(x.type, x.batch_dim), batch_major(y.type, y.batch_dim));
  return std::make_unique<Prefetcher>(data, x.type, y.type, x.batch_dim, y.batch_dim);
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
  const Port& yp = f.inputs[f.find_input(Role::Target)];
  const TensorType& yt = yp.type;
  r.has_accuracy = yt.dtype == DType::I64;
  // Label k belongs to sample (k / per_sample) % batch: the target's dims
  // after its batch dim are one sample's.
  int64_t per_sample = 1;
  for (size_t i = yp.batch_dim + 1; i < yt.shape.size(); ++i) per_sample *= yt.shape[i];
  const int64_t batch = s.batch_size();
  double loss_sum = 0;
  s.set_eval_offset(0);  // a model that samples in eval mode draws the same each pass
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
    for (int64_t k = 0; k < yt.numel(); ++k) {
      if ((k / per_sample) % batch >= real) continue;  // padding
      const float* row = o + k * classes;
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (row[c] > row[best]) best = c;
      r.correct += best == labels[k];
      ++r.labels;
    }
  }
  r.loss = r.count ? loss_sum / r.count : 0;
  r.accuracy = r.labels ? static_cast<double>(r.correct) / r.labels : 0;
  return r;
}

RunPosition resume_position(const CheckpointMeta& m, const std::string& path) {
  if (!m.run) fail(path + ": checkpoint metadata lacks 'epoch' (it was not saved by train)");
  try {
    LrSchedule::parse(m.run->lr_schedule);
  } catch (const Error& e) {
    fail(path + ": checkpoint has a bad LR schedule: " + e.what());
  }
  return *m.run;
}

namespace {

// Progress through the data, ordered as a run makes it.
struct Position {
  int64_t step = 0, epoch = 0, batch = 0;
  bool operator<(const Position& o) const {
    return std::tie(step, epoch, batch) < std::tie(o.step, o.epoch, o.batch);
  }
};

// The error names the file already, as a rule; then it is not said twice.
void skip_note(TrainObserver& ob, const std::string& path, const std::string& error) {
  const bool named = error.compare(0, path.size() + 2, path + ": ") == 0;
  ob.on_note(Note::SkippedCheckpoint, "skipping checkpoint " + (named ? error : path + ": " + error));
}

// --resume auto: the newest checkpoint (step files of `dir`, and `save`)
// that loads and resumes cleanly; a bad one is skipped with a warning.
// Returns "" (session untouched) when there is none.
std::string resume_auto(Session& s, const std::string& dir, const std::string& save,
                        RunPosition& rp, bool& checksummed, TrainObserver& ob) {
  std::vector<std::pair<Position, std::string>> found;
  std::vector<std::string> paths = list_checkpoints(dir);
  if (!save.empty() && ::access(save.c_str(), F_OK) == 0) paths.push_back(save);
  for (const auto& p : paths) {
    try {
      CheckpointMeta m = parse_checkpoint_metadata(read_safetensors_metadata(p), p);
      RunPosition r = resume_position(m, p);
      found.push_back({{m.step, r.epoch, r.batch}, p});
    } catch (const std::exception& e) {
      skip_note(ob, p, e.what());
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return b.first < a.first; });
  for (const auto& [pos, p] : found) {
    try {
      CheckpointMeta m = s.load_checkpoint(p);  // checks everything before changing state
      rp = resume_position(m, p);
      checksummed = m.checksummed;
      return p;
    } catch (const Error& e) {
      skip_note(ob, p, e.what());
    }
  }
  return "";
}

}  // namespace

void ObserverList::on_note(Note kind, const std::string& text) {
  for (TrainObserver* o : all) o->on_note(kind, text);
}
void ObserverList::on_batch(const BatchProgress& p) {
  for (TrainObserver* o : all) o->on_batch(p);
}
void ObserverList::on_epoch(const EpochReport& r) {
  for (TrainObserver* o : all) o->on_epoch(r);
}

bool batch_logged(int64_t batch, int64_t batches) {
  return batch % std::max<int64_t>(1, batches / 10) == 0 || batch == batches;
}

TrainResult train(Session& s, const Dataset& train_set, const Dataset& test_set,
                  const TrainOptions& o, TrainObserver* observer) {
  TrainObserver quiet;
  TrainObserver& ob = observer ? *observer : quiet;
  TrainResult result;
  double base_lr = o.lr >= 0 ? o.lr : s.lr();
  std::string schedule_spec = o.lr_schedule;
  std::string unit = o.lr_schedule_unit;
  int64_t seed = o.seed;
  const std::string dir =
      !o.checkpoint_dir.empty() ? o.checkpoint_dir : o.save.empty() ? "" : default_checkpoint_dir(o.save);
  if (o.checkpoint_every < 0) fail("--checkpoint-every must be >= 0");
  if (o.checkpoint_every > 0 && dir.empty())
    fail("--checkpoint-every needs a place for checkpoints: --save or --checkpoint-dir");
  if (o.keep < 1) fail("--keep must be at least 1");

  RunPosition rp;
  bool checksummed = true;
  const bool auto_resume = o.resume == "auto";
  if (auto_resume) {
    if (dir.empty()) fail("--resume auto needs --save or --checkpoint-dir to look in");
    result.resumed_from = resume_auto(s, dir, o.save, rp, checksummed, ob);
    if (result.resumed_from.empty())
      ob.on_note(Note::NoCheckpoint, "no checkpoint in " + dir + ": starting from the initial state");
    else
      ob.on_note(Note::Resumed, "resuming from " + result.resumed_from);
  } else if (!o.resume.empty()) {
    CheckpointMeta m = s.load_checkpoint(o.resume);
    rp = resume_position(m, o.resume);
    checksummed = m.checksummed;
    result.resumed_from = o.resume;
  }
  if (!result.resumed_from.empty() && !checksummed)
    ob.on_note(Note::Unchecked, unchecked_notice(result.resumed_from));
  if (!result.resumed_from.empty()) {
    if (o.lr < 0) base_lr = rp.base_lr;
    if (schedule_spec.empty()) schedule_spec = rp.lr_schedule;
    if (unit.empty()) unit = rp.lr_schedule_unit;
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
  // Unset: the resumed run's own, so a resume continues as it ran.
  const int64_t accum = o.accumulate > 0 ? o.accumulate : result.resumed_from.empty() ? 1 : rp.accumulate;
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

  const int64_t last_epoch = auto_resume ? o.epochs : rp.epoch + o.epochs;
  double loss_sum = rp.epoch_loss_sum;
  int64_t loss_count = rp.epoch_loss_count;
  Position written{-1, -1, -1};  // the last checkpoint written
  auto position = [&](int64_t epochs_done, int64_t batch) {
    RunPosition r;
    r.epoch = epochs_done;
    r.batch = batch;
    r.base_lr = base_lr;
    r.lr_schedule = sched.spec();
    r.lr_schedule_unit = unit;
    r.accumulate = accum;
    r.epoch_loss_sum = batch ? loss_sum : 0.0;
    r.epoch_loss_count = batch ? loss_count : 0;
    return r;
  };
  auto checkpoint = [&](int64_t epochs_done, int64_t batch) -> std::string {
    if (dir.empty()) return "";
    const std::string path = checkpoint_path(dir, s.step());
    const Position here{s.step(), epochs_done, batch};
    if (!(here < written) && !(written < here)) return path;  // already written
    make_checkpoint_dir(dir);
    s.save_checkpoint(path, position(epochs_done, batch));
    prune_checkpoints(dir, o.keep);
    written = here;
    return path;
  };
  auto stop_requested = [&] { return o.stop && o.stop->load() != 0; };
  auto stop = [&](int64_t epochs_done, int64_t batch) {
    result.stopped_by = o.stop->load();
    result.checkpoint = checkpoint(epochs_done, batch);
    result.epochs_done = epochs_done;
    result.skipped_steps = s.skipped_steps();
    return result;
  };

  for (int64_t e = rp.epoch; e < last_epoch; ++e) {
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
    const int64_t first = e == rp.epoch ? std::min(rp.batch, nb) : 0;
    if (first % accum != 0)
      fail(result.resumed_from + ": the checkpoint is " + std::to_string(first) +
           " batches into an epoch, inside an optimizer step of --accumulate " +
           std::to_string(accum));
    if (first < nb) pf->start(first, nb - first);
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t b = first; b < nb; ++b) {
      pf->next();
      if (per_step) {
        cursor.advance_to(s.step());
        s.set_lr(cursor.lr());
      }
      float loss;
      const bool step_done = accum == 1 || (b + 1) % accum == 0;
      try {
        if (accum == 1) {
          loss = s.train_step({pf->x().view}, pf->y().view);
        } else {
          loss = s.grad_step({pf->x().view}, pf->y().view);
          if (step_done) s.apply_grads();
        }
      } catch (const Error& ex) {
        fail("epoch " + std::to_string(e + 1) + ", " + ex.what());
      }
      if (std::isfinite(loss)) {  // a skipped step's loss may not be
        loss_sum += loss;
        ++loss_count;
      }
      BatchProgress bp;
      bp.epoch = e + 1;
      bp.batch = b + 1;
      bp.batches = nb;
      bp.batch_size = s.batch_size();
      bp.step = s.step();
      bp.loss = loss_count ? loss_sum / loss_count : 0.0;
      bp.lr = s.lr();
      bp.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      bp.timed_batches = b + 1 - first;
      ob.on_batch(bp);
      if (!step_done) continue;  // checkpoints and stops fall between optimizer steps
      if (o.checkpoint_every > 0 && s.step() % o.checkpoint_every == 0) checkpoint(e, b + 1);
      if (stop_requested()) return stop(e, b + 1);
    }
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rep.train_loss = loss_count ? loss_sum / loss_count : NAN;  // every step skipped
    rep.samples_per_s = (nb - first) * s.batch_size() / std::max(rep.seconds, 1e-9);
    rep.skipped = s.skipped_steps();
    rep.step = s.step();
    rep.test = evaluate(s, test_set);
    loss_sum = 0;
    loss_count = 0;
    if (!o.save.empty()) s.save_checkpoint(o.save, position(e + 1, 0));
    ob.on_epoch(rep);
    if (stop_requested()) return stop(e + 1, 0);
  }
  result.epochs_done = std::max(last_epoch, rp.epoch);
  result.skipped_steps = s.skipped_steps();
  return result;
}

}  // namespace ts
