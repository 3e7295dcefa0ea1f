// The epoch loop, public: shuffled batches through Session::train_step,
// evaluation on the test split, an LR schedule, checkpoints and resume. It is
// what `trainstep train` runs; a program of its own calls train() with any
// Dataset (trainstep/dataset.h: a built-in one by spec, or its own class)
// and a TrainObserver for progress (examples/cpp/train_epochs.cpp).
//
// Partial batches: the artifact's batch size is fixed, so training drops the
// last partial batch of each epoch (the shuffle changes which samples that
// is); evaluation pads the last batch and masks the padding, so every test
// sample counts.
//
// Crash safety: with checkpoint_every, a checkpoint is written atomically
// every N global steps into the checkpoint folder as
// `step-<global step, 10 digits>.ckpt`, keeping the newest `keep`. A checkpoint holds the state, the step (RNG
// offset), the seed, the LR schedule and the data position (epochs done,
// batches done in the current epoch), so a run resumed from it continues
// with the same shuffled order at the same batch and is bit-identical to an
// uninterrupted one (same thread count). resume = "auto" loads the newest
// valid checkpoint of the folder or --save, skipping corrupt ones.
//
// Data-parallel (a session with a collective of several ranks; one train()
// call per rank): each rank trains on a strided shard of each epoch's
// shuffle, evaluates a shard and the sums are reduced, only rank 0 reports
// to the observer and writes checkpoints, and the ranks agree on stops and
// on the checkpoint --resume auto picks. docs/distributed.md.
#pragma once
#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "trainstep/dataset.h"
#include "trainstep/session.h"

namespace ts {

struct TrainOptions {
  // Epochs to run in this call; after an explicit resume, more epochs (a
  // partly done epoch counts as one). With resume = "auto" the run's total,
  // so re-running the same command after a crash finishes the same run.
  int64_t epochs = 1;
  double lr = -1;                 // base LR; < 0: the artifact's (or checkpoint's)
  std::string lr_schedule;        // a spec of docs/training.md "LR schedules"; empty: checkpoint's or constant
  // "epoch": step the schedule once per epoch (index = epoch); "step": once
  // per training step (index = the session's global step). Empty: the
  // checkpoint's, else "epoch".
  std::string lr_schedule_unit;
  int64_t seed = 1;               // data order and RNG; a resume keeps the checkpoint's
  int64_t max_batches = 0;        // > 0: stop each epoch after this many batches
  // > 1: each optimizer step averages the gradients of this many batches
  // (Session::grad_step/apply_grads; the artifact needs --grads). A step
  // then equals one step on a batch this many times larger.
  int64_t accumulate = 0;  // batches per optimizer step; 0: the checkpoint's on resume, else 1
  std::string save;               // checkpoint after every epoch
  std::string resume;             // checkpoint to start from, or "auto"
  int64_t checkpoint_every = 0;   // > 0: a checkpoint every N global steps
  // Empty: next to `save`, named after it (out/m.ckpt -> out/m.checkpoints/),
  // if save is set.
  std::string checkpoint_dir;
  int keep = 3;                   // periodic checkpoints kept
  // Port name -> dataset field, where the names differ (`train --map`);
  // other ports take the field of their own name (data/feed.h, docs/data.md).
  std::map<std::string, std::string> map;
  // Threads that read and decode batches ahead of the step (each fills
  // whole batches; the batches do not depend on it). They share the cores
  // with the compute threads (SessionOptions::threads).
  int data_threads = 1;
  // Polled after every step: when non-zero (a signal number), the loop
  // writes a checkpoint and returns with TrainResult::stopped_by set.
  const std::atomic<int>* stop = nullptr;
};

struct TrainResult {
  int stopped_by = 0;         // the *stop value that ended the run early; 0: ran to the end
  std::string checkpoint;     // written on stop ("" when there is no folder or --save)
  std::string resumed_from;   // the checkpoint loaded, "" for a fresh start
  int64_t epochs_done = 0;    // total, counting epochs before a resume
  int64_t skipped_steps = 0;  // non-finite steps dropped (NonFinite::Skip), in total
};

// Where a run continues from checkpoint `m` (read from `path`): its run
// position, with the LR schedule checked. Throws ts::Error naming `path`
// when the checkpoint has none (one saved outside train) or a bad schedule.
RunPosition resume_position(const CheckpointMeta& m, const std::string& path);

struct EvalResult {
  double loss = 0;      // mean per-sample loss (batch losses weighted by their sizes)
  int64_t count = 0;    // samples
  // Samples of a last partial batch left out: an artifact whose eval step
  // gives the batch's loss (not each sample's) evaluates whole batches only,
  // as padding would enter that loss.
  int64_t left_out = 0;
  bool has_accuracy = false;  // integer (class) targets
  double accuracy = 0;  // correct / labels (per token for a sequence target)
  int64_t correct = 0, labels = 0;
  // A language model's target (int64, several labels a sample): exp(loss),
  // the loss being the mean per-token cross-entropy.
  bool has_perplexity = false;
  double perplexity = 0;
};

struct EpochReport {
  int64_t epoch = 0;  // 1-based, counting epochs before a resume
  int64_t step = 0;   // the session's global step at the epoch's end
  double lr = 0, train_loss = 0, samples_per_s = 0, seconds = 0;
  int64_t skipped = 0;  // non-finite steps dropped so far in the run (NonFinite::Skip)
  double data_wait = 0;  // of `seconds`, the time the steps waited for data
  EvalResult test;
};

// After each training batch.
struct BatchProgress {
  int64_t epoch = 0;               // 1-based, as EpochReport's
  int64_t batch = 0, batches = 0;  // batches done in the epoch (a resume's included), of its total
  int64_t batch_size = 0;  // samples per batch over all ranks (data-parallel: x ranks)
  int64_t step = 0;        // the session's global step after the batch
  double loss = 0;         // the epoch's mean train loss so far (finite losses only)
  double lr = 0;           // the batch's LR
  // Since this call's first batch of the epoch, and the batches that took it
  // (fewer than `batch` after a mid-epoch resume): for samples/s and an ETA.
  double seconds = 0;
  int64_t timed_batches = 0;
  double data_wait = 0;  // of `seconds`, the time the steps waited for data
};

// What a run has to say besides progress; `text` is the sentence to show.
enum class Note {
  Resumed,            // "resuming from PATH" (--resume auto found one)
  NoCheckpoint,       // "no checkpoint in DIR: starting from the initial state"
  Unchecked,          // the resumed checkpoint has no checksums (io/checksum.h)
  SkippedCheckpoint,  // "skipping checkpoint PATH: why" (--resume auto passed a bad one)
  SlowData,           // the steps waited for data a tenth of an epoch or more (said once)
};

// The library never prints: train() reports through this and the caller
// shows or logs it (the CLI draws a progress bar from it and writes
// --log-dir files). Every method defaults to nothing. Calls come from the
// training thread, between steps; a throw ends the run with that error.
struct TrainObserver {
  virtual ~TrainObserver() = default;
  virtual void on_note(Note kind, const std::string& text) {}
  virtual void on_batch(const BatchProgress& p) {}
  virtual void on_epoch(const EpochReport& r) {}  // after the epoch's evaluation and --save
};

// Hands every call to each of `all`, in order.
struct ObserverList : TrainObserver {
  std::vector<TrainObserver*> all;
  void on_note(Note kind, const std::string& text) override;
  void on_batch(const BatchProgress& p) override;
  void on_epoch(const EpochReport& r) override;
};

// Whether a progress line or log entry is due after batch `batch` (1-based)
// of `batches`: about 10 an epoch, and the last one.
bool batch_logged(int64_t batch, int64_t batches);

// Every test sample counts: the last batch is padded and masked. `map` as
// TrainOptions::map.
EvalResult evaluate(Session& s, const Dataset& test,
                    const std::map<std::string, std::string>& map = {}, int data_threads = 1);

// observer may be null: then the run reports nothing.
TrainResult train(Session& s, const Dataset& train_set, const Dataset& test_set,
                  const TrainOptions& o, TrainObserver* observer = nullptr);

// Graceful stop on SIGINT / SIGTERM: installs the handlers (idempotent) and
// returns the flag they set, for TrainOptions::stop. The first signal sets
// it to the signal number, so the run finishes its step, writes a
// checkpoint and returns; a second exits the process at once with
// 128 + signal.
const std::atomic<int>& install_stop_signals();

}  // namespace ts
