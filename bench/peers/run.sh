#!/usr/bin/env bash
# bench/peers from a clean clone: `make peers` (builds first) or
#   bench/peers/run.sh [--models mnist,resnet,...] [--threads 1,2] [--steps N] [--rounds R] ...
# (--models: names from examples/ or bench/peers/specs/, by default all that
# peers.py's MODELS lists).
# Sets up what it needs, once: python3-dev (inductor's kernels include
# Python.h), the torch 2.x venv (scripts/torch2-env.sh) and the JAX venv
# (jax-env.sh), both under ~/.cache/trainstep; a re-run installs nothing.
# Then runs peers.py (its --help lists the options); the table goes to
# stdout and out/peers/peers.md. TRAINSTEP_BIN picks another binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh peers
TORCH_PY=$(scripts/torch2-env.sh)
JAX_PY=$(bench/peers/jax-env.sh) || { echo "no JAX environment: its cells will say so" >&2; JAX_PY=""; }
exec /usr/bin/python3 bench/peers/peers.py --torch-python "$TORCH_PY" --jax-python "$JAX_PY" "$@"
