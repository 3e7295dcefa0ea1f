// What `trainstep train` shows while it runs: the library reports through
// ts::TrainObserver and this draws it.
//
// stderr, on a terminal: one bar redrawn in place (\r), at most 10 times a
// second: epoch, batch/total, the epoch's running loss, samples/s, ETA.
// Off a terminal (a pipe, a Slurm log): a plain line about 10 times an
// epoch, "epoch E [SAMPLES/TOTAL] loss L", written at once.
// Notes (resume, skipped checkpoints) go to stderr too; the epoch summary
// goes to stdout.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

#include "trainstep/train.h"

namespace tscli {

class TrainOutput : public ts::TrainObserver {
 public:
  explicit TrainOutput(bool tty);
  ~TrainOutput() override;  // ends a bar left mid-line (a stop, an error)

  void on_note(ts::Note kind, const std::string& text) override;
  void on_batch(const ts::BatchProgress& p) override;
  void on_epoch(const ts::EpochReport& r) override;
  void end_line();  // before printing anything else to the terminal

 private:
  void draw(const ts::BatchProgress& p);
  bool tty_;
  bool open_ = false;  // a bar is on the terminal without its newline
  size_t width_ = 0;   // of the bar last drawn, to blank what a shorter one leaves
  std::chrono::steady_clock::time_point drawn_{};
};

}  // namespace tscli
