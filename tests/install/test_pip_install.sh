#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `pip install SOURCE` into a fresh virtual environment (with Debian's site packages, for numpy
# and python3-torch), then, from outside the source tree: import tessera and tessera.torch from
# the venv (libtessera inside the package, found through the extension's RUNPATH; torch's
# allocator module where libtorch-dev is installed), a training
# through Session, and examples/torch/arxiv_gcn.py at 2 ranks. The source is copied first, so
# the build leaves nothing in it.
# Usage: test_pip_install.sh SOURCE_DIR MPIEXEC [PYTHON]
set -euo pipefail
src=$1 mpiexec=$2 python=${3:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { echo "== $*"; }
fail() { echo "FAILED: $*" >&2; exit 1; }

step "a copy of the sources git tracks (and new files it does not ignore)"
mkdir -p "$work/source" && (cd "$src" && git ls-files --cached --others --exclude-standard -z |
  xargs -0 cp --parents -t "$work/source")
step "a fresh venv"
"$python" -m venv --system-site-packages "$work/venv"
step "pip install . (CMake through scikit-build-core)"
# Without the CUDA backend and the AVX/AVX2/AVX-512 kernel copies: a third of the build time on
# two cores, and both are built and tested by the main build; what this test checks is the
# packaging (the wheel, libtessera inside it, the RUNPATH, the imports).
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$work/venv/bin/pip" install --quiet \
  --config-settings=cmake.define.TESSERA_CUDA=OFF \
  --config-settings=cmake.define.TESSERA_CPU_DISPATCH=OFF "$work/source"
cd "$work"
where=$("$work/venv/bin/python" -c 'import tessera, tessera.torch; print(tessera.__file__)')
[[ $where == "$work/venv/"* ]] || fail "tessera imported from $where, not from the venv"
ls "$(dirname "$where")"/libtessera.so* >/dev/null || fail "libtessera is not in the package"
# torch's large tensors in Tessera's memory: tessera._torch_memory_* built and loaded (where
# libtorch-dev is installed, as scripts/setup.sh does).
if [[ -f /usr/include/c10/core/CPUAllocator.h ]]; then
  memory=$("$work/venv/bin/python" -c 'import tessera.torch as tt; print(tt.tensor_memory())')
  [[ $memory == "tessera "* ]] || fail "tessera.torch.tensor_memory() is $memory"
fi
step "Session from the venv"
"$work/venv/bin/python" -c '
import tessera
s = tessera.Session(num_layers=2, hidden_channels=16, epochs=10)
s.load("synth:default")
print("final test", s.train()["runs"][0]["final_test"])'
step "examples/torch/arxiv_gcn.py at 2 ranks from the venv"
OMP_NUM_THREADS=1 "$mpiexec" -n 2 "$work/venv/bin/python" "$src/examples/torch/arxiv_gcn.py" \
  --dataset synth:default --epochs 5 --hidden_channels 32 --log_steps 5
echo "pip install: OK"
