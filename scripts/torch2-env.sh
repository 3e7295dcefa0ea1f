#!/usr/bin/env bash
# Makes (once) the torch 2.x virtual environment the test matrix and
# bench/peers use, and prints its python. It lives outside the clone, in
# ${TRAINSTEP_CACHE:-~/.cache/trainstep}/torch-$VERSION, so clean clones and
# CI reuse it; a re-run that finds it whole installs nothing.
#
# PyPI's Linux torch wheel depends on ~3 GB of CUDA wheels (5.4 GB venv,
# 72 s here). On CPU, torch only needs its CUDA libraries to resolve at
# import, so torch goes in --no-deps with its pure-Python dependencies, the
# CUDA libraries of /usr/local/cuda are linked where torch's RPATH looks
# (nvidia/cu13/lib), and only the four that the toolkit lacks or has too old
# (cuFile, cuSPARSELt, NVSHMEM, NCCL) come from PyPI: 2.1 GB, ~45 s.
# Without /usr/local/cuda, or if that import fails, the full dependency set
# is installed instead.
set -euo pipefail
cd "$(dirname "$0")"
VERSION=2.15.0
NVIDIA=(nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1
        nvidia-nvshmem-cu13==3.7.2 nvidia-nccl-cu13==2.30.7)
CUDA_LIB=/usr/local/cuda/lib64
ROOT=${TRAINSTEP_CACHE:-$HOME/.cache/trainstep}
VENV=$ROOT/torch-$VERSION
PY=$VENV/bin/python
STAMP=$VENV/.complete
# The stamp names what was installed, so a changed pin rebuilds the venv;
# when only torch2-requirements.txt changed, those pins are installed into it
# in place (pip changes only what differs) instead of downloading torch again.
TORCH_WANT="torch==$VERSION ${NVIDIA[*]}"
# Packages that require torch (peft, accelerate) go in --no-deps after it,
# from their own list: pip would otherwise fetch a torch of its own choosing.
ON_TORCH=torch2-requirements-on-torch.txt
WANT="$TORCH_WANT $(cat torch2-requirements.txt $ON_TORCH | grep -v '^#' | tr '\n' ' ')"

ok() { "$PY" -c "import torch, numpy, pytest, xxhash, tensorboard; torch.ones(2).sum()" >/dev/null 2>&1; }
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && ok; then echo "$PY"; exit 0; fi
if [ -f "$STAMP" ] && [[ "$(cat "$STAMP")" == "$TORCH_WANT "* ]]; then
  echo "updating the pinned packages of $VENV" >&2
  if "$PY" -m pip install -q --no-input -r torch2-requirements.txt >&2 &&
     "$PY" -m pip install -q --no-input --no-deps -r $ON_TORCH >&2 && ok; then
    echo "$WANT" > "$STAMP"
    echo "$PY"
    exit 0
  fi
  echo "updating $VENV failed: making it anew" >&2
fi

{
  echo "making the torch $VERSION environment in $VENV"
  rm -rf "$VENV"
  mkdir -p "$ROOT"
  /usr/bin/python3 -m venv "$VENV"
  PIP=("$PY" -m pip install -q --no-input)
  "${PIP[@]}" -r torch2-requirements.txt
  if [ -d "$CUDA_LIB" ]; then
    "${PIP[@]}" --no-deps "torch==$VERSION" "${NVIDIA[@]}"
    LIB=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/nvidia/cu13/lib
    mkdir -p "$LIB"
    for f in "$CUDA_LIB"/lib*.so.*; do
      [ -e "$LIB/$(basename "$f")" ] || ln -s "$f" "$LIB/"
    done
  fi
  if ! ok; then
    echo "torch $VERSION does not import with /usr/local/cuda's libraries: installing its full dependencies"
    "${PIP[@]}" "torch==$VERSION"
  fi
  "${PIP[@]}" --no-deps -r $ON_TORCH
  ok || { echo "torch $VERSION: the environment in $VENV does not import torch" ; exit 1; }
  echo "$WANT" > "$STAMP"
} >&2
echo "$PY"
