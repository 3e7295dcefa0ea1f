#include "trainstep/train.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include "data/batcher.h"
#include "data/feed.h"
#include "data/prefetcher.h"
#include "io/checksum.h"
#include "io/safetensors.h"
#include "ir/program.h"
#include "train/checkpoints.h"
#include "train/lr_schedule.h"

namespace ts {

namespace {

// The step's input and target ports, in order, as the data path sees them.
std::vector<PortSpec> data_ports(const Session& s, const char* fn) {
  std::vector<PortSpec> ports;
  for (Role role : {Role::Input, Role::Target})
    for (const Port& p : s.program().function(fn).inputs)
      if (p.role == role) ports.push_back({p.name, role == Role::Target, p.type, p.batch_dim});
  return ports;
}

}  // namespace

EvalResult evaluate(Session& s, const Dataset& test, const std::map<std::string, std::string>& map,
                    int data_threads) {
  Batcher data(test, s.batch_size());
  // Data-parallel: each rank evaluates its shard; the sums are reduced.
  if (s.world_size() > 1) data.shard(s.rank(), s.world_size(), false);
  const Feed feed = make_feed(test, data_ports(s, "eval_step"), s.batch_size(), map);
  auto pf = std::make_unique<Prefetcher>(data, feed, data_threads);
  pf->start(0, data.padded_batches());
  EvalResult r;
  // Integer targets are class labels (one per target element, e.g. one per
  // token for a language model): accuracy is argmax over the output's last
  // dim. Float targets (regression) have no accuracy.
  const Function& f = s.program().function("eval_step");
  const Port& yp = f.inputs[f.find_input(Role::Target)];
  const TensorType& yt = yp.type;
  // A batch loss (a loss the model returns) has no per-sample split: whole
  // batches only, and no accuracy (the outputs need not be per sample).
  const bool sample_losses = s.eval_loss_per_sample();
  r.has_accuracy = sample_losses && yt.dtype == DType::I64 && pf->targets().size() == 1;
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
    if (!sample_losses && real < batch) {
      r.left_out += real;
      continue;
    }
    s.eval_step(pf->inputs(), pf->targets());
    if (sample_losses) {
      const float* sl = s.eval_sample_loss().as<float>();
      for (int64_t i = 0; i < real; ++i) loss_sum += sl[i];
    } else {
      const Tensor& bl = s.eval_batch_loss();
      loss_sum += real * (bl.dtype == DType::F64 ? *bl.as<double>() : *bl.as<float>());
    }
    r.count += real;
    if (!r.has_accuracy) continue;
    const Tensor& out = s.eval_output();
    const int64_t* labels = pf->targets()[0].as<int64_t>();
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
  if (Collective* c = s.world_size() > 1 ? s.collective() : nullptr) {
    double sums[4] = {loss_sum, double(r.count), double(r.correct), double(r.labels)};
    c->all_reduce_now(sums, 4, DType::F64, ReduceOp::Sum, "the evaluation sums");
    loss_sum = sums[0];
    r.count = static_cast<int64_t>(sums[1]);
    r.correct = static_cast<int64_t>(sums[2]);
    r.labels = static_cast<int64_t>(sums[3]);
  }
  r.loss = r.count ? loss_sum / r.count : 0;
  r.accuracy = r.labels ? static_cast<double>(r.correct) / r.labels : 0;
  r.has_perplexity = r.has_accuracy && per_sample > 1 && r.count > 0;
  if (r.has_perplexity) r.perplexity = std::exp(r.loss);
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

namespace {

// Where this call starts: the checkpoint it resumed, if any, and the
// position saved in it.
struct Start {
  RunPosition at;
  std::string from;  // "": from the session's current state
};

Start resume(Session& s, const TrainOptions& o, const std::string& dir, TrainObserver& ob) {
  Start st;
  bool checksummed = true;
  if (o.resume == "auto") {
    if (dir.empty()) fail("--resume auto needs --save or --checkpoint-dir to look in");
    // Data-parallel: rank 0 chooses, and every rank loads that one.
    if (s.rank() == 0) st.from = resume_auto(s, dir, o.save, st.at, checksummed, ob);
    if (s.world_size() > 1) {
      st.from = s.collective()->broadcast_string(st.from, 0, "the --resume auto agreement");
      if (s.rank() != 0 && !st.from.empty()) {
        CheckpointMeta m = s.load_checkpoint(st.from);
        st.at = resume_position(m, st.from);
        checksummed = m.checksummed;
      }
    }
    if (st.from.empty())
      ob.on_note(Note::NoCheckpoint, "no checkpoint in " + dir + ": starting from the initial state");
    else
      ob.on_note(Note::Resumed, "resuming from " + st.from);
  } else if (!o.resume.empty()) {
    CheckpointMeta m = s.load_checkpoint(o.resume);
    st.at = resume_position(m, o.resume);
    checksummed = m.checksummed;
    st.from = o.resume;
  }
  if (!st.from.empty() && !checksummed) ob.on_note(Note::Unchecked, unchecked_notice(st.from));
  return st;
}

// The run's settings: the options, and where they are unset, the resumed
// run's own, so a resume continues as it ran.
struct Plan {
  double base_lr = 0;
  LrSchedule sched = LrSchedule::parse("");
  std::string unit;     // "epoch" or "step"
  int64_t seed = 0;
  int64_t accum = 1;    // batches per optimizer step
  int64_t batches = 0;  // per epoch: whole optimizer steps only
  int64_t last_epoch = 0;
  int64_t first_batch = 0;  // of the resumed epoch, on each rank
};

Plan plan_run(Session& s, const TrainOptions& o, const Start& st, const Batcher& data) {
  Plan p;
  const bool resumed = !st.from.empty();
  p.base_lr = o.lr >= 0 ? o.lr : resumed ? st.at.base_lr : s.lr();
  p.sched = LrSchedule::parse(!o.lr_schedule.empty() || !resumed ? o.lr_schedule : st.at.lr_schedule);
  p.unit = !o.lr_schedule_unit.empty() ? o.lr_schedule_unit : resumed ? st.at.lr_schedule_unit : "";
  if (p.unit.empty()) p.unit = "epoch";
  if (p.unit != "epoch" && p.unit != "step")
    fail("bad LR schedule unit '" + p.unit + "' (expected 'epoch' or 'step')");
  p.seed = resumed ? s.seed() : o.seed;
  p.batches = data.full_batches();
  if (o.max_batches > 0 && o.max_batches < p.batches) p.batches = o.max_batches;
  if (p.batches == 0) fail("the training set has fewer samples than one batch");
  p.accum = o.accumulate > 0 ? o.accumulate : resumed ? st.at.accumulate : 1;
  if (p.accum < 1) fail("--accumulate must be at least 1");
  if (p.accum > 1) {
    if (o.accumulate == 0 && !s.has_grad_functions())
      fail("the checkpoint trained with --accumulate " + std::to_string(p.accum) +
           ": give --accumulate " + std::to_string(p.accum) + " again to go on so");
    s.require_grad_functions("--accumulate");
    if (p.batches < p.accum)
      fail("--accumulate " + std::to_string(p.accum) + ": an epoch has only " +
           std::to_string(p.batches) + " batches");
    p.batches -= p.batches % p.accum;
  }
  p.last_epoch = o.resume == "auto" ? o.epochs : st.at.epoch + o.epochs;
  // The resumed epoch's position is in samples over all ranks, so a run
  // saved on N ranks resumes on M.
  p.first_batch = st.at.batch;
  const int64_t global_batch = s.batch_size() * s.world_size();
  if (st.at.samples >= 0) {
    if (st.at.samples % global_batch != 0)
      fail(st.from + ": the checkpoint is " + std::to_string(st.at.samples) +
           " samples into an epoch, not a whole number of batches of " +
           std::to_string(s.batch_size()) + " on " + std::to_string(s.world_size()) +
           " rank(s); resume it on a number of ranks that divides it");
    p.first_batch = st.at.samples / global_batch;
  }
  return p;
}

// One call's loop over epochs and batches, with its running epoch loss and
// the checkpoints it writes.
class Run {
 public:
  Run(Session& s, const Dataset& test, const TrainOptions& o, TrainObserver& ob, std::string dir,
      const Start& st, const Plan& plan, Batcher& data, Prefetcher& pf)
      : s_(s), test_(test), o_(o), ob_(ob), dir_(std::move(dir)), st_(st), p_(plan),
        cursor_(plan.sched, plan.base_lr), data_(data), pf_(pf),
        loss_sum_(st.at.epoch_loss_sum), loss_count_(st.at.epoch_loss_count) {}

  TrainResult run() {
    TrainResult result;
    result.resumed_from = st_.from;
    for (int64_t e = st_.at.epoch; e < p_.last_epoch; ++e) {
      try {
        if (epoch(e, result)) return result;
      } catch (const CollectiveError& ex) {  // a rank died or hangs: say when
        fail("epoch " + std::to_string(e + 1) + ", step " + std::to_string(s_.step()) + ": " +
             ex.what());
      }
    }
    result.epochs_done = std::max(p_.last_epoch, st_.at.epoch);
    result.skipped_steps = s_.skipped_steps();
    return result;
  }

 private:
  // Epoch e (0-based); true when a stop request ended the run in it.
  bool epoch(int64_t e, TrainResult& result) {
    const bool per_step = p_.unit == "step";
    EpochReport rep;
    rep.epoch = e + 1;
    if (per_step) {
      // The schedule index is the session's global step (kept in
      // checkpoints), so a resume continues the sequence where it stopped.
      cursor_.advance_to(s_.step());
      rep.lr = cursor_.lr();
    } else {
      rep.lr = p_.sched.at_epoch(p_.base_lr, e);
    }
    s_.set_lr(rep.lr);
    data_.shuffle(static_cast<uint64_t>(p_.seed), e);
    if (s_.world_size() > 1) data_.shard(s_.rank(), s_.world_size(), true);
    const int64_t nb = p_.batches, first = e == st_.at.epoch ? std::min(p_.first_batch, nb) : 0;
    if (first % p_.accum != 0)
      fail(st_.from + ": the checkpoint is " + std::to_string(first) +
           " batches into an epoch, inside an optimizer step of --accumulate " +
           std::to_string(p_.accum));
    if (first < nb) pf_.start(first, nb - first);
    const auto t0 = std::chrono::steady_clock::now();
    const double waited0 = pf_.waited();
    for (int64_t b = first; b < nb; ++b) {
      pf_.next();
      if (per_step) {
        cursor_.advance_to(s_.step());
        s_.set_lr(cursor_.lr());
      }
      float loss;
      const bool step_done = p_.accum == 1 || (b + 1) % p_.accum == 0;
      try {
        if (p_.accum == 1) {
          loss = s_.train_step(pf_.inputs(), pf_.targets());
        } else {
          loss = s_.grad_step(pf_.inputs(), pf_.targets());
          if (step_done) s_.apply_grads();
        }
      } catch (const CollectiveError&) {
        throw;  // run() says where
      } catch (const Error& ex) {
        fail("epoch " + std::to_string(e + 1) + ", " + ex.what());
      }
      if (std::isfinite(loss)) {  // a skipped step's loss may not be
        loss_sum_ += loss;
        ++loss_count_;
      }
      BatchProgress bp;
      bp.epoch = e + 1;
      bp.batch = b + 1;
      bp.batches = nb;
      bp.batch_size = s_.batch_size() * s_.world_size();  // samples a step, over all ranks
      bp.step = s_.step();
      bp.loss = loss_count_ ? loss_sum_ / loss_count_ : 0.0;
      bp.lr = s_.lr();
      bp.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      bp.timed_batches = b + 1 - first;
      bp.data_wait = pf_.waited() - waited0;
      ob_.on_batch(bp);
      if (!step_done) continue;  // checkpoints and stops fall between optimizer steps
      if (o_.checkpoint_every > 0 && s_.step() % o_.checkpoint_every == 0) checkpoint(e, b + 1);
      if (stop_requested()) return stop(e, b + 1, result);
    }
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rep.data_wait = pf_.waited() - waited0;
    if (!slow_noted_ && rep.seconds > 0.5 && rep.data_wait > 0.1 * rep.seconds) {
      slow_noted_ = true;
      ob_.on_note(Note::SlowData,
                  "the steps waited for data " + std::to_string(int(100 * rep.data_wait / rep.seconds)) +
                      "% of epoch " + std::to_string(e + 1) + ": the loader is behind; more loader "
                      "threads may help (--data-threads, now " + std::to_string(pf_.threads()) +
                      "), and where steps are short, fewer compute threads (--threads) leave the "
                      "loader more of the cores");
    }
    double sums[2] = {loss_sum_, double(loss_count_)};
    if (s_.world_size() > 1)  // the report covers every rank's batches
      s_.collective()->all_reduce_now(sums, 2, DType::F64, ReduceOp::Sum, "the epoch loss");
    rep.train_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;  // every step skipped
    rep.samples_per_s =
        (nb - first) * s_.batch_size() * s_.world_size() / std::max(rep.seconds, 1e-9);
    rep.skipped = s_.skipped_steps();
    rep.step = s_.step();
    rep.test = evaluate(s_, test_, o_.map, o_.data_threads);
    s_.check_state_replicated();  // data-parallel: every rank's state is rank 0's
    loss_sum_ = 0;
    loss_count_ = 0;
    // A sharded optimizer's ranks all take part; rank 0 writes.
    if (!o_.save.empty() && (s_.rank() == 0 || s_.shards_optimizer()))
      s_.save_checkpoint(o_.save, position(e + 1, 0));
    ob_.on_epoch(rep);
    return stop_requested() && stop(e + 1, 0, result);
  }

  RunPosition position(int64_t epochs_done, int64_t batch) const {
    RunPosition r;
    r.epoch = epochs_done;
    r.batch = batch;
    r.base_lr = p_.base_lr;
    r.lr_schedule = p_.sched.spec();
    r.lr_schedule_unit = p_.unit;
    r.accumulate = p_.accum;
    r.epoch_loss_sum = batch ? loss_sum_ : 0.0;
    r.epoch_loss_count = batch ? loss_count_ : 0;
    r.samples = batch * s_.batch_size() * s_.world_size();
    r.world_size = s_.world_size();
    return r;
  }

  // A periodic or stop checkpoint in the folder ("" when there is none);
  // one position is written once.
  std::string checkpoint(int64_t epochs_done, int64_t batch) {
    if (dir_.empty()) return "";
    const std::string path = checkpoint_path(dir_, s_.step());
    const Position here{s_.step(), epochs_done, batch};
    if (!(here < written_) && !(written_ < here)) return path;  // already written
    written_ = here;
    if (s_.rank() != 0) {  // rank 0 writes for all (the others send their shards)
      if (s_.shards_optimizer()) s_.save_checkpoint(path, position(epochs_done, batch));
      return path;
    }
    make_checkpoint_dir(dir_);
    s_.save_checkpoint(path, position(epochs_done, batch));
    prune_checkpoints(dir_, o_.keep);
    return path;
  }

  // Data-parallel: every rank stops at the same step when any was asked to.
  bool stop_requested() {
    if (!o_.stop) return false;
    stop_signal_ = o_.stop->load();
    if (s_.world_size() > 1) stop_signal_ = s_.collective()->max(stop_signal_, "the stop agreement");
    return stop_signal_ != 0;
  }
  bool stop(int64_t epochs_done, int64_t batch, TrainResult& result) {
    result.stopped_by = stop_signal_;
    result.checkpoint = checkpoint(epochs_done, batch);
    result.epochs_done = epochs_done;
    result.skipped_steps = s_.skipped_steps();
    return true;
  }

  Session& s_;
  const Dataset& test_;
  const TrainOptions& o_;
  TrainObserver& ob_;
  const std::string dir_;
  const Start& st_;
  const Plan& p_;
  LrSchedule::Cursor cursor_;
  Batcher& data_;
  Prefetcher& pf_;
  double loss_sum_;
  int64_t loss_count_;
  Position written_{-1, -1, -1};  // the last checkpoint written
  int64_t stop_signal_ = 0;        // what stop_requested() saw
  bool slow_noted_ = false;        // Note::SlowData said
};

}  // namespace

TrainResult train(Session& s, const Dataset& train_set, const Dataset& test_set,
                  const TrainOptions& o, TrainObserver* observer) {
  TrainObserver quiet;
  // Data-parallel: rank 0 reports for the run.
  TrainObserver& ob = observer && s.rank() == 0 ? *observer : quiet;
  const std::string dir =
      !o.checkpoint_dir.empty() ? o.checkpoint_dir : o.save.empty() ? "" : default_checkpoint_dir(o.save);
  if (o.checkpoint_every < 0) fail("--checkpoint-every must be >= 0");
  if (o.checkpoint_every > 0 && dir.empty())
    fail("--checkpoint-every needs a place for checkpoints: --save or --checkpoint-dir");
  if (o.keep < 1) fail("--keep must be at least 1");
  // --save's folder is made now: a run must not train for hours and then
  // find it cannot write its result.
  if (!o.save.empty() && s.rank() == 0) {
    const std::string parent = std::filesystem::path(o.save).parent_path().string();
    if (!parent.empty()) make_checkpoint_dir(parent);
  }

  const Start st = resume(s, o, dir, ob);
  s.broadcast_state(0);  // replicas start equal, as DDP makes them
  Batcher data(train_set, s.batch_size());
  if (s.world_size() > 1) data.shard(s.rank(), s.world_size(), true);
  const Feed feed = make_feed(train_set, data_ports(s, "train_step"), s.batch_size(), o.map);
  Prefetcher pf(data, feed, o.data_threads);
  const Plan plan = plan_run(s, o, st, data);
  s.set_seed(plan.seed);
  if (plan.accum > 1) s.set_accumulation(plan.accum);
  return Run(s, test_set, o, ob, dir, st, plan, data, pf).run();
}

}  // namespace ts
