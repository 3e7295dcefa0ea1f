#!/bin/sh
# Speedup over eager PyTorch at each ISA level, for the zoo at 1 thread:
#   bench/isa_levels.sh [LEVELS] [MODELS]   (defaults: "native avx2", the five zoo models)
# "native" is the CPU's own level; avx2 runs both sides as an AVX2-only
# machine would (bench/compare --isa). TRAINSTEP_BIN picks the binary.
# Prints one `model level speedup eager_ms trainstep_ms` line per run.
set -eu
cd "$(dirname "$0")/.."
LEVELS=${1:-"native avx2"}
MODELS=${2:-"mnist resnet mobilenet transformer lstm"}
ROUNDS=${ROUNDS:-3}
for m in $MODELS; do
  for l in $LEVELS; do
    if [ "$l" = native ]; then isa=""; else isa="--isa $l"; fi
    # shellcheck disable=SC2086
    out=$(bench/compare "examples/$m/spec.py" --threads 1 --rounds "$ROUNDS" $isa)
    e=$(echo "$out" | sed -n 's/^eager_ms_median=//p')
    t=$(echo "$out" | sed -n 's/^trainstep_ms_median=//p')
    s=$(echo "$out" | sed -n 's/^speedup=//p')
    echo "$m $l $s $e $t"
  done
done
