// A checkpoint's metadata: one schema for everything that writes or reads
// it. Session::save_checkpoint / load_checkpoint carry the session's part
// (step, seed, LR, skipped steps); the trainer adds where a run stands, so
// a resumed run continues at the same batch. docs/format.md lists the keys.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ts {

// Where a training run stands (written by ts::train).
struct RunPosition {
  int64_t epoch = 0;  // epochs done
  int64_t batch = 0;  // batches done in the current epoch ("data_position"), per rank
  // Samples done in the current epoch over all ranks ("data_samples"), so a
  // run saved on N ranks resumes on M; -1: not recorded (older files: then
  // batch × the batch size of one rank).
  int64_t samples = -1;
  int64_t world_size = 1;  // ranks of the run that wrote it
  double base_lr = 0;
  std::string lr_schedule;                // LrSchedule spec ("" = constant)
  std::string lr_schedule_unit = "epoch";  // "epoch" or "step"
  int64_t accumulate = 1;                 // batches per optimizer step
  double epoch_loss_sum = 0;              // the current epoch's losses so far
  int64_t epoch_loss_count = 0;
};

struct CheckpointMeta {
  std::string model;  // the artifact's model name
  int64_t step = 0;   // global steps taken (the next step's RNG offset)
  int64_t seed = 0;
  double lr = 0;      // LR of the last step
  int64_t nonfinite_skips = 0;  // steps dropped by NonFinite::Skip (counted in step)
  std::optional<RunPosition> run;  // absent from a checkpoint saved outside ts::train
  bool checksummed = true;  // false: a file from before checksums (read only)
  // Keys outside the schema, kept as written (a caller's own notes).
  std::map<std::string, std::string> extra;
};

// The file's metadata keys for `m`, the format keys included (the writer
// adds the checksums).
std::map<std::string, std::string> checkpoint_metadata(const CheckpointMeta& m);
// Parses and checks a checkpoint's metadata; throws ts::Error naming
// `path` for a missing, malformed or out-of-range field.
CheckpointMeta parse_checkpoint_metadata(const std::map<std::string, std::string>& meta,
                                         const std::string& path);

}  // namespace ts
