#!/usr/bin/env bash
# The whole suite: C++ unit tests (ctest), then the Python tests that drive
# the exporter and the binary against eager PyTorch (pytest).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=$(scripts/find-python.sh)
rc=0
ctest --test-dir build --output-on-failure -j 2 || rc=1
TRAINSTEP_BIN="$PWD/build/trainstep" "$PY" -m pytest -q tests/python || rc=1
exit $rc
