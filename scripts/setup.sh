#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages Tessera needs (only those missing), then configures and builds it
# in ./build. Safe to run again: installed packages are skipped and the build is incremental.
# Environment: TESSERA_BUILD_DIR (default build), TESSERA_CMAKE_ARGS (extra cmake arguments).
set -euo pipefail
cd "$(dirname "$0")/.."

# Tessera runs on MPICH. PT-Scotch (libptscotch-dev, for partition_distributed alone, linked
# statically: libbz2-dev and liblzma-dev for its compressed-file readers) is built against Open
# MPI, which it pulls in beside MPICH; the MPI alternatives are set back to MPICH below, so that
# mpicc, mpiexec and mpi.h stay MPICH's.
packages=(cmake make g++ pkg-config zlib1g-dev libzip-dev libopenblas-dev libhdf5-dev libgtest-dev
          libcli11-dev nlohmann-json3-dev mpich libmpich-dev libmetis-dev
          libptscotch-dev openmpi-bin libbz2-dev liblzma-dev
          python3-dev python3-numpy python3-h5py python3-scipy python3-torch libtorch-dev python3-venv
          python3-pip
          pybind11-dev python3-matplotlib slurm-wlm munge
          universal-ctags ninja-build)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q -o DPkg::Lock::Timeout=600
  $sudo apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}"
fi

# Open MPI's packages rank their alternatives above MPICH's: point mpi (mpicc, mpicxx), mpirun
# (mpiexec) and the mpi include directory back at MPICH where they are not.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
for choice in mpi:/usr/bin/mpicc.mpich mpirun:/usr/bin/mpirun.mpich \
              "mpi-$arch:/usr/include/$arch/mpich"; do
  name=${choice%%:*} path=${choice#*:}
  if [ "$(update-alternatives --query "$name" 2>/dev/null | sed -n 's/^Value: //p')" != "$path" ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo update-alternatives --set "$name" "$path"
  fi
done

build_dir=${TESSERA_BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${TESSERA_CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$(nproc)"
