#!/usr/bin/env bash
# The main job: export the seed's MNIST CNN (Adadelta lr=1.0, batch 64),
# check it against eager PyTorch, and train it 1 epoch on Fashion-MNIST from
# C++ with the seed's StepLR(step_size=1, gamma=0.7).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
build/trainstep export examples/mnist/spec.py --out out/mnist.tstep
build/trainstep verify out/mnist.tstep --quiet
build/trainstep train out/mnist.tstep --data fashion-mnist --epochs "${EPOCHS:-1}" \
  --lr-schedule step:1:0.7 --save out/mnist.ckpt ${THREADS:+--threads $THREADS}
