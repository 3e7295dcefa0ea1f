#!/usr/bin/env bash
# Installs the Debian packages trainstep needs, only if some are missing, so
# it is cheap to re-run. Needs root (or sudo) the first time. (python3-pip:
# tests/python/test_package.py pip-installs the exporter with it;
# libgraphviz-dev: `inspect --graph` lays graphs out with it; chromium:
# tests/python/test_svg.py and scripts/render_svgs.sh render the SVGs headless;
# libopenmpi-dev, openmpi-bin: `train --distributed mpi` and its tests;
# libopenblas0-openmp: eager torch's BLAS, and trainstep's OpenBLAS GEMM
# candidate, loaded at run time;
# ccache: repeated builds, CI's three among them, reuse earlier compiles;
# libzip-dev: npz datasets; libbz2-dev, libssl-dev: what libzip.pc's
# Libs.private names, for `pkg-config --static --libs trainstep`;
# libturbojpeg0-dev, libspng-dev: images:DIR datasets;
# slurmd, slurmctld, slurm-client, munge: tests/python/test_slurm.py runs a
# one-node Slurm cluster.)
#   scripts/install-deps.sh        build and test
#   scripts/install-deps.sh fuzz   also clang-14 and libFuzzer (`make fuzz`)
#   scripts/install-deps.sh peers  also python3-dev (bench/peers: torch.compile's kernels)
set -euo pipefail
PKGS=(cmake g++ make pkg-config python3 python3-torch python3-numpy python3-pytest
      libdnnl-dev nlohmann-json3-dev libcli11-dev libgtest-dev python3-venv python3-pip zlib1g-dev
      libzip-dev libbz2-dev libssl-dev libturbojpeg0-dev libspng-dev libxxhash-dev python3-xxhash libgraphviz-dev chromium
      dataset-fashion-mnist fortunes libopenblas0-openmp libopenmpi-dev openmpi-bin ccache
      slurmd slurmctld slurm-client munge)
# clang's OpenMP (libomp) is what CMake finds for clang++.
[ "${1:-}" = fuzz ] && PKGS+=(clang-14 libclang-rt-14-dev libomp-14-dev)
# torch.compile (inductor) builds C++ kernels that include Python.h.
[ "${1:-}" = peers ] && PKGS+=(python3-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
