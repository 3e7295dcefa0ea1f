// The epoch loop: shuffled batches through Session::train_step, evaluation on
// the test split, LR schedule per epoch, checkpoints. Used by `trainstep
// train` and usable from C++ directly.
//
// Partial batches: the artifact's batch size is fixed, so training drops the
// last partial batch of each epoch (the shuffle changes which samples that
// is); evaluation pads the last batch and masks the padding, so every test
// sample counts.
#pragma once
#include <functional>
#include <string>

#include "data/dataset.h"
#include "train/lr_schedule.h"
#include "trainstep/session.h"

namespace ts {

struct TrainOptions {
  int64_t epochs = 1;             // epochs to run in this call
  double lr = -1;                 // base LR; < 0: the artifact's (or checkpoint's)
  std::string lr_schedule;        // see LrSchedule; empty: checkpoint's or constant
  // "epoch": step the schedule once per epoch (index = epoch); "step": once
  // per training step (index = the session's global step). Empty: the
  // checkpoint's, else "epoch".
  std::string lr_schedule_unit;
  int64_t seed = 1;               // data order and RNG; a resume keeps the checkpoint's
  int64_t max_batches = 0;        // > 0: stop each epoch after this many batches
  // > 1: each optimizer step averages the gradients of this many batches
  // (Session::grad_step/apply_grads; the artifact needs --grads). A step
  // then equals one step on a batch this many times larger.
  int64_t accumulate = 1;
  std::string save;               // checkpoint after every epoch
  std::string resume;             // checkpoint to start from
  bool progress = true;
};

struct EvalResult {
  double loss = 0;      // mean per-sample loss
  int64_t count = 0;    // samples
  bool has_accuracy = false;  // integer (class) targets
  double accuracy = 0;  // correct / labels
  int64_t correct = 0, labels = 0;
};

struct EpochReport {
  int64_t epoch = 0;  // 1-based, counting epochs before a resume
  double lr = 0, train_loss = 0, samples_per_s = 0, seconds = 0;
  EvalResult test;
};

// Every test sample counts: the last batch is padded and masked.
EvalResult evaluate(Session& s, const Dataset& test);

void train(Session& s, const Dataset& train_set, const Dataset& test_set,
           const TrainOptions& o, const std::function<void(const EpochReport&)>& on_epoch);

}  // namespace ts
