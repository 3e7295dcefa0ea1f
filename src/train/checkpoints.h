// The checkpoint folder of a training run: periodic checkpoints as
// `step-<global step, 10 digits>.ckpt`, the newest `keep` of them kept, and
// the search behind `--resume auto`.
//
// Default folder: next to --save, named after it: `out/mnist.ckpt` ->
// `out/mnist.checkpoints/`. Files are written atomically (temp file, fsync,
// rename), so a kill leaves at worst a stale temp file, which the next
// prune removes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

std::string default_checkpoint_dir(const std::string& save);
std::string checkpoint_path(const std::string& dir, int64_t step);

// Step files in dir (absent dir: none), by file name, in no particular order.
std::vector<std::string> list_checkpoints(const std::string& dir);

// Creates dir (and its parents) if needed.
void make_checkpoint_dir(const std::string& dir);

// Deletes all but the `keep` newest step files and temp files left by
// killed writers (another process's `step-*.ckpt.tmp.PID`).
void prune_checkpoints(const std::string& dir, int keep);

}  // namespace ts
