// `trainstep export SPEC.py --out NAME.tstep`: runs the Python exporter with
// an interpreter that can import torch.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "commands.h"
#include "exit_codes.h"
#include "trainstep/error.h"

extern char** environ;

namespace tscli {

namespace {

volatile sig_atomic_t g_child = 0;

// SIGINT/SIGTERM sent to us by kill(1) (si_code <= 0) go on to the Python
// child, so it stops and we report its status; a terminal's Ctrl-C
// (SI_KERNEL) already reached the child through the process group.
void forward(int sig, siginfo_t* info, void*) {
  if (g_child > 0 && info && info->si_code <= 0) kill(g_child, sig);
}

struct ForwardSignals {
  struct sigaction old_int {}, old_term {};
  explicit ForwardSignals(pid_t child) {
    g_child = child;
    struct sigaction sa {};
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~ForwardSignals() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    g_child = 0;
  }
};

// The child's exit status, 128 + N if signal N stopped it (also stored in
// *signal_out), -1 if it could not start.
int spawn_wait(const std::vector<std::string>& args, bool quiet, int* signal_out = nullptr) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (quiet) {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  ForwardSignals fwd(pid);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (signal_out) *signal_out = WTERMSIG(status);
  return exit_code::kSignalBase + WTERMSIG(status);
}

bool is_file(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string self_path(const char* argv0) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) return std::string(buf, n);
  return argv0;
}

// $TRAINSTEP_PYTHON, else python3 if it can import torch, else /usr/bin/python3.
std::string find_python() {
  if (const char* p = std::getenv("TRAINSTEP_PYTHON"); p && *p) return p;
  if (spawn_wait({"python3", "-c", "import torch"}, true) == 0) return "python3";
  return "/usr/bin/python3";
}

// Which exporter runs, as docs/python.md "Install the exporter" says: the folder
// $TRAINSTEP_PYTHONPATH names; else the source tree's python/ this binary
// was built from, or python/ beside its folder, while it is there (it
// matches the binary, local edits included); else "", the trainstep
// package installed in the interpreter. TRAINSTEP_PYTHONPATH=installed asks
// for the installed one even with the source tree there.
std::string python_dir(const std::string& exe) {
  if (const char* p = std::getenv("TRAINSTEP_PYTHONPATH"); p && *p)
    return std::string(p) == "installed" ? "" : p;
  std::string beside = exe.substr(0, exe.rfind('/')) + "/../python";
  for (const std::string& dir : {std::string(TRAINSTEP_PYTHON_DIR), beside})
    if (is_file(dir + "/trainstep/__init__.py")) return dir;
  return "";
}

}  // namespace

int run_python(const char* argv0, const std::vector<std::string>& module_args) {
  std::string exe = self_path(argv0);
  std::string pydir = python_dir(exe);
  if (!pydir.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    std::string pp = pydir + (old && *old ? ":" + std::string(old) : "");
    setenv("PYTHONPATH", pp.c_str(), 1);
  }
  // trainstep.launch refuses an exporter of another version than ours.
  setenv("TRAINSTEP_BIN", exe.c_str(), 1);
  setenv("TRAINSTEP_BIN_VERSION", TRAINSTEP_VERSION, 1);
  std::string py = find_python();
  if (pydir.empty()) {
    // Else Python's own "No module named trainstep" would be all the user saw.
    int found = spawn_wait({py, "-c", "import trainstep.launch"}, true);
    if (found < 0) ts::fail("cannot run the Python side with '" + py + "'");
    if (found != 0) {
      const char* p = std::getenv("TRAINSTEP_PYTHONPATH");
      std::string why = p && *p ? "TRAINSTEP_PYTHONPATH=installed"
                                : "the source tree's " TRAINSTEP_PYTHON_DIR " is not there";
      ts::fail(py + " cannot import the trainstep exporter (" + why +
               "): install it into that environment (pip install ./python from the source "
               "tree) or set TRAINSTEP_PYTHONPATH to the exporter's folder");
    }
  }
  // trainstep.launch turns even an import failure or an early Ctrl-C into one line.
  std::vector<std::string> args{py, "-m", "trainstep.launch"};
  args.insert(args.end(), module_args.begin(), module_args.end());
  int sig = 0;
  int rc = spawn_wait(args, false, &sig);
  if (rc < 0) ts::fail("cannot run the Python side with '" + py + "'");
  // Python prints its own errors; a signal it does not catch (SIGTERM, the
  // OOM killer's SIGKILL) would leave none.
  if (sig)
    std::fprintf(stderr, "trainstep: %s (Python) stopped by signal %d (%s)\n",
                 module_args[0].c_str(), sig, strsignal(sig));
  return rc;
}

void add_export(CLI::App& app, Action& action, const char* argv0) {
  auto* cmd = app.add_subcommand("export", "Capture a spec's whole training step as an artifact");
  auto spec = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto steps = std::make_shared<int>(-1);
  auto seed = std::make_shared<int>(0);
  auto grads = std::make_shared<bool>(false);
  auto trace = std::make_shared<bool>(false);
  auto rounds = std::make_shared<int>(-1);
  auto autocast = std::make_shared<std::string>();
  cmd->add_option("spec", *spec, "SPEC.py defining build() -> trainstep.TrainSpec")->required();
  cmd->add_option("--out,-o", *out, "artifact to write (NAME.tstep)")->required();
  add_example(cmd, "trainstep export examples/mnist/spec.py --out mnist.tstep");
  cmd->add_option("--golden-steps", *steps, "eager steps recorded for verify (default: spec's, 3)");
  cmd->add_option("--seed", *seed, "RNG seed of the golden trace");
  cmd->add_flag("--grads", *grads,
                "also export grad_step and apply_step, with step 0's eager gradients for "
                "verify to check them (without it, the runtime cuts them from train_step for "
                "--accumulate, data-parallel and Session::grad)");
  cmd->add_flag("--trace-values", *trace,
                "also record every train_step node's eager value on golden step 0 (verify --trace)");
  cmd->add_option("--calibration-rounds", *rounds,
                  "eager reruns of the golden steps with one rounding of noise on the gradients "
                  "and on the parameters, N of each (default 2), whose spread sets verify's "
                  "tolerance per value; 0: no calibration")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--autocast", *autocast,
                  "run the forward and the loss under torch.autocast('cpu', dtype=bfloat16), as "
                  "TrainSpec(autocast=torch.bfloat16) does (docs/bf16.md)")
      ->check(CLI::IsMember({"bfloat16"}));
  cmd->callback([=, &action] {
    action = [=] {
      std::vector<std::string> args{"trainstep.exporter", *spec, "--out", *out,
                                    "--seed", std::to_string(*seed)};
      if (*grads) args.push_back("--grads");
      if (*trace) args.push_back("--trace-values");
      if (!autocast->empty()) {
        args.push_back("--autocast");
        args.push_back(*autocast);
      }
      if (*rounds >= 0) {
        args.push_back("--calibration-rounds");
        args.push_back(std::to_string(*rounds));
      }
      if (*steps >= 0) {
        args.push_back("--golden-steps");
        args.push_back(std::to_string(*steps));
      }
      return run_python(argv0, args);
    };
  });
}

}  // namespace tscli
