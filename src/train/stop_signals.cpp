#include "trainstep/train.h"

#include <signal.h>
#include <unistd.h>

namespace ts {

namespace {

std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler may only touch lock-free atomics");

// Async-signal-safe: an atomic exchange, write(2) and _exit(2) only.
extern "C" void on_stop_signal(int sig) {
  if (g_stop.exchange(sig) != 0) _exit(128 + sig);
  static const char msg[] =
      "\ntrainstep: stopping after the current step (a second signal exits at once)\n";
  ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)r;
}

}  // namespace

const std::atomic<int>& install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return g_stop;
}

}  // namespace ts
