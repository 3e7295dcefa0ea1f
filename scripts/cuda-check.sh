#!/usr/bin/env bash
# The GPU checks of the CUDA backend, for a machine with an NVIDIA GPU and a
# PyTorch with CUDA (the peers benchmark), from a build with the backend:
#
#   scripts/cuda-check.sh [BUILD_DIR] [OUT_DIR]      (defaults: build, out/cuda)
#
# 1. the CUDA gtests: every CUDA kernel against the CPU kernel on random and
#    zoo shapes, and sessions on the GPU against sessions on the CPU;
# 2. export of the MNIST CNN, the ResNet and the transformer (and the MNIST
#    CNN at batch 512), then `trainstep verify --device cuda` of the three;
# 3. bench/cuda/peers.py: eager PyTorch and torch.compile(mode=
#    "reduce-overhead") against `trainstep bench --device cuda`, one run on
#    the same GPU (STEPS, ROUNDS set its size).
# VERIFY=0 skips step 2's verify (EXPORT_ARGS="--calibration-rounds 0
# --golden-steps 1" then makes the exports quick, for the benchmark alone).
# Exits 1 if a gtest or a verify failed. Logs and tables go to OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-out/cuda}
STEPS=${STEPS:-100}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
export TRAINSTEP_BIN=$PWD/$BUILD/trainstep TRAINSTEP_PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
status=0
phase() { echo "== $* ($SECONDS s)"; }

phase "gpu"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# The exports use the CPU while the gtests use the GPU.
phase "export (background)"
declare -A spec=([mnist]=examples/mnist/spec.py [resnet]=examples/resnet/spec.py
                 [transformer]=examples/transformer/spec.py [mnist512]=bench/cuda/mnist_b512.py)
for m in "${!spec[@]}"; do
  timeout 600 "$TRAINSTEP_BIN" export "${spec[$m]}" --out "$OUT/$m.tstep" ${EXPORT_ARGS:-} \
    >"$OUT/export_$m.log" 2>&1 &
done

phase "CUDA gtests"
timeout 300 "$BUILD/trainstep_cuda_tests" --gtest_brief=1 >"$OUT/gtest.log" 2>&1 || status=1
grep -E "FAILED|Failure|error|PASSED|SKIPPED \]|tests ran" "$OUT/gtest.log" | head -80
wait
for m in "${!spec[@]}"; do tail -n 1 "$OUT/export_$m.log"; done

phase "verify --device cuda"
[ "${VERIFY:-1}" = 0 ] && echo "skipped (VERIFY=0)"
for m in $([ "${VERIFY:-1}" = 0 ] || echo mnist resnet transformer); do
  if ! timeout 300 "$TRAINSTEP_BIN" verify "$OUT/$m.tstep" --device cuda --quiet >"$OUT/verify_$m.log" 2>&1; then
    status=1
    tail -n 25 "$OUT/verify_$m.log"
    # Kernel by kernel, so a fault names its node.
    TRAINSTEP_CUDA_DEBUG=1 timeout 300 "$TRAINSTEP_BIN" verify "$OUT/$m.tstep" --device cuda --quiet \
      >"$OUT/verify_${m}_debug.log" 2>&1
    tail -n 5 "$OUT/verify_${m}_debug.log"
  else
    tail -n 2 "$OUT/verify_$m.log"
  fi
done

# Host allocations per step: `trainstep bench` under the LD_PRELOAD counter
# (tests/alloc_counter.c) with 10 and with 30 timed steps; CUDA's own
# libraries are counted apart.
if [ -f "$BUILD/liballoc_counter.so" ] && [ -f "$OUT/mnist.tstep" ]; then
  phase "host allocations per step (mnist, --device cuda)"
  for n in 10 30; do
    LD_PRELOAD=$PWD/$BUILD/liballoc_counter.so ALLOC_COUNTER_OUT=$OUT/allocs_$n.txt \
      ALLOC_COUNTER_EXCLUDE=libcuda,libcublas,libcudnn,libnvrtc \
      "$TRAINSTEP_BIN" bench "$OUT/mnist.tstep" --device cuda --steps $n --warmup 3 >"$OUT/bench_$n.log" 2>&1
    echo "$n steps: $(cat "$OUT/allocs_$n.txt")"
  done
  grep -E "train_step:|step_ms_median" "$OUT/bench_30.log"
fi

if [ $status -ne 0 ] && [ -z "${PEERS_ANYWAY:-}" ]; then
  phase "peers skipped: a check failed (PEERS_ANYWAY=1 runs them)"
  exit $status
fi
phase "peers: eager and torch.compile against trainstep on this GPU"
for m in ${PEERS:-mnist mnist512 resnet transformer}; do
  [ -f "$OUT/$m.tstep" ] || continue
  timeout 400 python3 bench/cuda/peers.py "${spec[$m]}" "$OUT/$m.tstep" --binary "$TRAINSTEP_BIN" \
    --steps "$STEPS" --rounds "$ROUNDS" 2>"$OUT/peers_$m.err" | tee -a "$OUT/peers.md" \
    || tail -n 5 "$OUT/peers_$m.err"
done
phase "done"
exit $status
