#!/usr/bin/env bash
# The whole suite: C++ unit tests (ctest), then the Python tests that drive
# the exporter and the binary against eager PyTorch (pytest).
# BUILD=DIR runs it on another build folder (`make test-asan`: build-asan);
# a sanitizer build runs with its options and suppressions (scripts/*.supp).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=$(scripts/find-python.sh)
if grep -q "^TRAINSTEP_SANITIZE:STRING=." "$BUILD/CMakeCache.txt" 2>/dev/null; then
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
  export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi
rc=0
ctest --test-dir "$BUILD" --output-on-failure -j 2 || rc=1
TRAINSTEP_BIN="$PWD/$BUILD/trainstep" "$PY" -m pytest -q tests/python || rc=1
exit $rc
