#!/usr/bin/env bash
# One Fashion-MNIST epoch of the seed's recipe: trainstep (C++) against
# PyTorch eager, same threads, measured back to back in one run.
# Usage: bench/epoch_vs_eager.sh [THREADS]   (after `make demo` built out/mnist.tstep)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-1}
PY=$(scripts/find-python.sh)
[ -f out/mnist.tstep ] || build/trainstep export examples/mnist/spec.py --out out/mnist.tstep
ts_out=$(build/trainstep train out/mnist.tstep --data fashion-mnist --epochs 1 --threads "$T" 2>/dev/null)
echo "$ts_out"
ts_s=$(echo "$ts_out" | sed -n 's/.*, \([0-9.]*\) s$/\1/p')
eager_out=$("$PY" bench/eager_epoch.py --threads "$T")
echo "$eager_out"
eager_s=$(echo "$eager_out" | sed -n 's/^eager_epoch_s=//p')
echo "threads=$T trainstep_epoch_s=$ts_s eager_epoch_s=$eager_s"
awk -v a="$eager_s" -v b="$ts_s" 'BEGIN { printf "speedup=%.2f\n", a / b }'
