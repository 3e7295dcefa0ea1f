#!/usr/bin/env bash
# The whole suite: C++ unit tests (ctest), then the Python tests that drive
# the exporter and the binary against eager PyTorch (pytest), once per torch:
# the pinned 2.x venv that scripts/torch2-env.sh makes runs every test;
# Debian's 1.13 (or $TRAINSTEP_PYTHON) runs those whose result can depend on
# the torch that exported (not the `runtime` ones: tests/python/conftest.py).
# TORCH2=0 skips the 2.x run, and 1.13 then runs everything.
# BUILD=DIR runs it on another build folder (`make test-asan`: build-asan);
# a sanitizer build runs with its options and suppressions (scripts/*.supp).
# MARK=EXPR picks the pytest tests by marker instead (`make test-asan`: asan).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if grep -q "^TRAINSTEP_SANITIZE:STRING=." "$BUILD/CMakeCache.txt" 2>/dev/null; then
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
  export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi
PYS=("$(scripts/find-python.sh)")
if [ "${TORCH2:-1}" = 1 ]; then
  PY2=$(scripts/torch2-env.sh) && PYS+=("$PY2") || { echo "cannot make the torch 2.x environment"; exit 1; }
fi
rc=0
start=$SECONDS
ctest --test-dir "$BUILD" --output-on-failure -j 2 || rc=1
summary=("ctest: $((SECONDS - start)) s")
for py in "${PYS[@]}"; do
  v=$("$py" -c "import torch; print(torch.__version__)")
  echo "== pytest with torch $v ($py)"
  log=$(mktemp)
  start=$SECONDS
  mark=${MARK:-}
  [ -z "$mark" ] && [ ${#PYS[@]} -gt 1 ] && [ "$py" != "${PYS[-1]}" ] && mark="not runtime"
  [ -n "$mark" ] && echo "   tests marked: $mark"
  TRAINSTEP_BIN="$PWD/$BUILD/trainstep" "$py" -m pytest -q ${mark:+-m "$mark"} tests/python 2>&1 |
    tee "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  summary+=("torch $v: $(grep -E '^=*.*(passed|failed|error)' "$log" | tail -1 | tr -d '=' |
              sed 's/^ *//') (${mark:-all}; $((SECONDS - start)) s)")
  rm -f "$log"
done
printf '%s\n' "${summary[@]}"
exit $rc
