#!/bin/sh
# Data-parallel scaling on this machine: samples/s of 1 rank against N ranks
# (1 thread each, loopback MPI), with and without overlapping the
# all-reduce with the backward, and the share of the all-reduce hidden.
#   bench/dp_scaling.sh [RANKS] [MODELS]   (defaults: 2, "mnist transformer")
# Rounds interleave the three runs (ROUNDS, default 3); the ratios come from
# the medians. Prints one line per model:
#   model ranks 1rank_samples_s Nrank_samples_s speedup no_overlap_speedup hidden_pct
set -eu
cd "$(dirname "$0")/.."
RANKS=${1:-2}
MODELS=${2:-"mnist transformer"}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-40}
BIN=${TRAINSTEP_BIN:-build/trainstep}
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np $RANKS"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for m in $MODELS; do
  art="$dir/$m.tstep"
  "$BIN" export "examples/$m/spec.py" --grads --out "$art" >/dev/null
  : >"$dir/one"; : >"$dir/par"; : >"$dir/seq"; : >"$dir/hid"
  for _ in $(seq "$ROUNDS"); do
    "$BIN" bench "$art" --threads 1 --steps "$STEPS" | sed -n 's/.*; \([0-9.]*\) samples\/s$/\1/p' >>"$dir/one"
    out=$($MPIRUN "$BIN" bench "$art" --threads 1 --steps "$STEPS" --distributed mpi --profile)
    echo "$out" | sed -n 's/.*; \([0-9.]*\) samples\/s$/\1/p' >>"$dir/par"
    echo "$out" | sed -n 's/.*: \([0-9.]*\)% hidden behind the backward$/\1/p' >>"$dir/hid"
    $MPIRUN "$BIN" bench "$art" --threads 1 --steps "$STEPS" --distributed mpi --no-overlap |
      sed -n 's/.*; \([0-9.]*\) samples\/s$/\1/p' >>"$dir/seq"
  done
  one=$(median <"$dir/one"); par=$(median <"$dir/par"); seq=$(median <"$dir/seq")
  hid=$(median <"$dir/hid")
  awk -v m="$m" -v r="$RANKS" -v one="$one" -v par="$par" -v seq="$seq" -v hid="$hid" \
    'BEGIN { printf "%s %s %s %s %.2f %.2f %s\n", m, r, one, par, par / one, seq / one, hid }'
done
