// Graceful stop on SIGINT / SIGTERM for a training run: the first signal
// sets a flag (to the signal number) that the train loop polls after every
// step (TrainOptions::stop), so it finishes the step, writes a checkpoint
// and returns; a second signal exits the process at once with 128 + signal.
#pragma once
#include <atomic>

namespace ts {

// Installs the handlers (idempotent) and returns the flag they set.
const std::atomic<int>& install_stop_signals();

}  // namespace ts
