#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz/targets.h) for a bounded time:
#   scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET
# Each target starts from its seed corpus (tests/fuzz/corpus/TARGET, read
# only) plus what earlier runs found (BUILD_DIR/fuzz-corpus/TARGET). A crash
# input lands in BUILD_DIR/fuzz-findings/TARGET/; copy it to
# tests/fuzz/regressions/TARGET/ once fixed (the gtest FuzzCorpus replays
# those). Prints executions per target; exits 1 on any finding.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-fuzz}
SECS=${2:-60}
TARGETS=(program ir_text safetensors checkpoint idx npz shards image)
# Random programs have random shapes: their kernel picks are measured but
# not written to the user's cache file (ops/kernel_choice.h).
export TRAINSTEP_CACHE=""
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}"

# A dictionary of JSON keys and every op name, so mutations form programs.
DICT="$BUILD/fuzz-program.dict"
{
  for k in format version name batch_size optimizer state kind dtype shape functions inputs nodes \
           op attrs outputs types role value index train_step eval_step float32 int64 bool \
           param buffer optim lr rng_seed rng_offset input target loss output sample_loss; do
    echo "\"\\\"$k\\\"\""
  done
  "$BUILD/trainstep" ops --json | /usr/bin/python3 -c \
    'import json,sys; [print(json.dumps(json.dumps(o["name"]))) for o in json.load(sys.stdin)["ops"]]'
} > "$DICT"

rc=0
summary=""
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/fuzz-corpus/$t"
  findings="$BUILD/fuzz-findings/$t"
  mkdir -p "$corpus" "$findings"
  args=(-max_total_time="$SECS" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096
        -artifact_prefix="$findings/")
  case $t in
    program) args+=(-dict="$DICT" -max_len=65536) ;;
    ir_text) args+=(-dict="$DICT" -max_len=32768) ;;
    *) args+=(-max_len=4096) ;;
  esac
  log="$BUILD/fuzz-$t.log"
  echo "fuzz: $t for ${SECS}s"
  "$BUILD/fuzz_$t" "${args[@]}" "$corpus" "tests/fuzz/corpus/$t" > "$log" 2>&1
  status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  n=$(ls "$findings" | wc -l)
  summary+=$(printf "%-12s %10s executions, %5s corpus inputs, %s findings" "$t" "${execs:-?}" \
             "$(ls "$corpus" | wc -l)" "$n")$'\n'
  if [ $status -ne 0 ] || [ "$n" -ne 0 ]; then
    rc=1
    echo "fuzz: $t FAILED (exit $status); see $log and $findings/"
    grep -m 20 -E "ERROR|SUMMARY|runtime error|fuzz property|terminate|what\(\)" "$log"
  fi
done
echo "fuzz summary (${SECS}s per target):"
printf "%s" "$summary"
exit $rc
