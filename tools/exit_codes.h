// The CLI's exit statuses, in one place (README "Errors and exit codes";
// python/trainstep/cli_errors.py uses the same numbers).
#pragma once

namespace tscli::exit_code {

constexpr int kOk = 0;
constexpr int kFailure = 1;   // bad input or a failed command: a one-line message
constexpr int kUsage = 2;     // a bad command line
constexpr int kMismatch = 3;  // verify ran, and the runtime disagrees with the golden trace
// Stopped by a signal: 128 + its number (SIGINT 130, SIGTERM 143), as shells report it.
constexpr int kSignalBase = 128;

constexpr const char* kHelpFooter =
    "Exit status: 0 success; 1 failure (bad input, a failed command; one-line message); "
    "2 bad command line; 3 verify mismatch; 130/143 interrupted (SIGINT/SIGTERM). "
    "--debug prints more detail on errors (Python tracebacks).";

}  // namespace tscli::exit_code
