#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU check: on a machine with a GPU, runs the GPU tests, the SpMM bandwidth benchmark (against
# the device's measured copy bandwidth), graph, pipeline and hybrid parallelism with 4 ranks on
# the GPU at 8 and 32 layers (bench_pipeline: bytes against the traffic model, epoch time on
# synth:arxiv-like), Tessera's GCN with --device cuda when this build has a
# GPU-resident epoch, tessera.torch on CUDA tensors (when this machine's python3 loads the pack's
# module), and PyTorch Geometric's GCN on the same synthetic graph, and writes every
# output plus summary.txt under OUTDIR, each step under a timeout so that the whole run fits in
# BUDGET_S seconds (default 480).
#
# The GPU machine has CUDA, CMake, PyTorch and PyG but no MPICH, METIS, HDF5 or OpenBLAS and no
# package registry. So the binaries normally come prebuilt from a pack made on a build machine
# from a portable CUDA build (-DTESSERA_NATIVE_ARCH=OFF, CMAKE_CUDA_ARCHITECTURES with 90):
#   scripts/gpu-check.sh --pack PACK_DIR [BUILD_DIR]   (here; BUILD_DIR default build-cuda;
#                                                       writes PACK_DIR/tessera-gpu.tar.xz)
#   scripts/gpu-check.sh OUTDIR                        (there; PACK_DIR from TESSERA_GPU_PACK,
#                                                       default build-cuda/gpu-pack)
# There the pack is unpacked into a scratch folder (removed at exit); its binaries run as
# singleton MPI processes with the pack's libraries and the machine's CUDA libraries (toolkit,
# else PyTorch's nvidia wheels) on their library path, nothing else's, and the multi-rank GPU
# tests run at 2 and 4 ranks on the one GPU (--gpu-comm mpi) under the pack's mpiexec.
# Without a pack it falls back to a CUDA build in build-gpu (which needs those libraries).
# Settings (environment): PRESET (products-like), LAYERS (3), HIDDEN (256), EPOCHS (20),
# BUDGET_S (480). Exit status: 0 all steps ran, 1 a step failed, 2 no GPU / bad usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

usage() {
  sed -n '2,/^set /p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

if [[ ${1:-} == --pack ]]; then
  [[ $# -ge 2 && $# -le 3 ]] || usage
  exec bash "$here/gpu/pack.sh" "${3:-$root/build-cuda}" "$2"
fi
[[ $# -eq 1 && ${1:-} != -* ]] || usage
out=$1
mkdir -p "$out" || { echo "gpu-check: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

budget=${BUDGET_S:-480}
start=$(date +%s)
preset=${PRESET:-products-like}
layers=${LAYERS:-3}
hidden=${HIDDEN:-256}
epochs=${EPOCHS:-20}
failed=0

# step NAME LIMIT_S CMD...: runs CMD with output in NAME.log, under the smaller of LIMIT_S and
# what is left of the budget; records the outcome.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - ($(date +%s) - start)))
  ((limit > left)) && limit=$left
  if ((limit < 5)); then
    note "$name: skipped (time budget of ${budget} s used up)"
    failed=1
    return 1
  fi
  local t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local took=$(($(date +%s) - t0))
  if ((rc == 0)); then
    note "$name: ok (${took} s)"
  elif ((rc == 124 || rc == 137)); then
    note "$name: timed out after ${limit} s (see $name.log)"
    failed=1
  else
    note "$name: failed with status $rc (${took} s; see $name.log)"
    failed=1
  fi
  return $rc
}

# ---- is there a GPU? ----
if ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi -L > "$out/nvidia-smi.txt" 2>&1 \
   || ! grep -q '^GPU ' "$out/nvidia-smi.txt"; then
  note "gpu-check: no GPU on this machine (nvidia-smi missing or lists no GPU); nothing measured"
  exit 2
fi
note "gpu-check $(date -u +%FT%TZ) on $(head -1 "$out/nvidia-smi.txt")"

# ---- binaries: a pack, else an existing or fresh CUDA build ----
# run: the prefix for every Tessera binary (its library path; python3 and the rest keep theirs).
pack=${TESSERA_GPU_PACK:-$root/build-cuda/gpu-pack}
archive=$pack/tessera-gpu.tar.xz
run=()
if [[ -f $archive || -x $pack/bin/test_cuda_kernels ]]; then
  if [[ -f $archive ]]; then
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/tessera-gpu.XXXXXX") ||
      { note "gpu-check: cannot make a scratch folder to unpack $archive"; exit 1; }
    trap 'rm -rf "$scratch"' EXIT
    t0=$(date +%s)
    if command -v xz > /dev/null 2>&1; then
      tar -xJf "$archive" -C "$scratch" 2> "$out/unpack.log"
    else
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
        "$archive" "$scratch" 2> "$out/unpack.log"
    fi || { note "gpu-check: cannot unpack $archive (see unpack.log)"; exit 1; }
    unpacked=$scratch/tessera-gpu
    note "binaries: pack $archive ($(head -1 "$unpacked/BUILD_INFO" 2>/dev/null); unpacked in" \
         "$(($(date +%s) - t0)) s)"
  else
    unpacked=$pack  # an unpacked pack (bin/, lib/) made by an older pack.sh
    note "binaries: pack $pack ($(head -1 "$pack/BUILD_INFO" 2>/dev/null))"
  fi
  bin=$unpacked/bin
  # CUDA libraries of this machine: the toolkit's; anything ldd still misses (NCCL, or all of
  # them without a toolkit) from PyTorch's nvidia wheels.
  libpath=$unpacked/lib
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d $d ]] && libpath=$libpath:$d
  done
  inherited=${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # after ours: the pack's libraries win
  wanted=$(for b in "$bin"/*; do LD_LIBRARY_PATH=$libpath$inherited ldd "$b" 2>&1; done |
           awk '$2 == "=>" && $3 == "not" {print $1}' | sort -u)
  wheels=""
  [[ -n $wanted ]] && command -v python3 > /dev/null &&
    wheels=$(python3 -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null)
  if [[ -n $wheels ]]; then
    for lib in $wanted; do
      found=$(find $wheels -name "$lib" 2>/dev/null | head -1)
      [[ -n $found && :$libpath: != *:$(dirname "$found"):* ]] && libpath=$libpath:$(dirname "$found")
    done
  fi
  libpath=$libpath$inherited
  { cat "$unpacked/BUILD_INFO" 2>/dev/null; echo "library path: $libpath"
    for b in "$bin"/*; do echo "== ldd $b"; LD_LIBRARY_PATH=$libpath ldd "$b" 2>&1; done
  } > "$out/libraries.log"
  if grep -q "not found" "$out/libraries.log"; then
    note "libraries: some not found (see libraries.log):" \
         "$(grep "not found" "$out/libraries.log" | sed 's/^[[:space:]]*//' | sort -u | head -5 | tr '\n' ';')"
    failed=1
  fi
  run=(env "LD_LIBRARY_PATH=$libpath")
else
  build=$root/build-gpu
  note "binaries: no pack at $pack; building in $build"
  step configure 120 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSERA_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DTESSERA_BUILD_PYTHON=OFF -DTESSERA_NATIVE_ARCH=OFF &&
  step build 240 cmake --build "$build" -j "$(nproc)" --target test_cuda_kernels \
    test_cuda_runtime test_cuda_training test_cuda_codec test_cuda_attention \
    test_cuda_distributed test_cuda_distributed_graph test_cuda_cli test_communicator_conformance \
    bench_cuda bench_pipeline train_gcn partition_graph tessera_data
  if [[ ! -x $build/tests/cuda/test_cuda_kernels ]]; then
    note "gpu-check: no binaries (the build needs MPICH, METIS, HDF5 and OpenBLAS: make a pack" \
         "on a build machine with scripts/gpu-check.sh --pack)"
    exit 1
  fi
  mkdir -p "$build/gpu-bin"
  for b in tests/cuda/test_cuda_kernels tests/cuda/test_cuda_runtime tests/cuda/test_cuda_training \
           tests/cuda/test_cuda_codec tests/cuda/test_cuda_attention tests/cuda/test_cuda_distributed \
           tests/cuda/test_cuda_distributed_graph tests/cuda/test_cuda_cli \
           tests/comm/test_communicator_conformance bench/bench_cuda bench/bench_pipeline \
           apps/train_gcn apps/partition_graph apps/tessera_data; do ln -sf "$build/$b" "$build/gpu-bin/"; done
  bin=$build/gpu-bin
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8} OPENBLAS_NUM_THREADS=1

# ---- GPU tests (the twins, the runtime, the communicator contract on one rank's GPU, GPU
# training against the CPU; Cora's part skips there unless the shared datasets came along) ----
for t in test_cuda_runtime test_cuda_kernels test_cuda_attention test_cuda_codec \
         test_communicator_conformance test_cuda_training test_cuda_distributed_graph; do
  step "$t" 90 "${run[@]}" "$bin/$t" --gtest_output="xml:$out/$t.xml"
done

# ---- several ranks on the one GPU (--gpu-comm mpi: the staged communicator's GPU buffers, GPU
# training at 2 and 4 ranks against the CPU, train_gcn under mpiexec; NCCL's cases skip unless
# each rank has a GPU) ----
launcher=$bin/mpiexec  # the pack's; a build uses the machine's
[[ -x $launcher ]] || launcher=$(command -v mpiexec || true)
if [[ -n $launcher ]]; then
  for n in 2 4; do
    for t in test_communicator_conformance test_cuda_distributed test_cuda_distributed_graph; do
      step "${t}_np$n" 120 "${run[@]}" env OMP_NUM_THREADS=2 "$launcher" -n "$n" "$bin/$t"
    done
  done
  # train_gcn under mpiexec: 2 ranks on the GPU over MPI; a rank that never joins NCCL (2 GPUs)
  step test_cuda_cli 120 "${run[@]}" env TESSERA_TRAIN_GCN="$bin/train_gcn" \
    TESSERA_MPIEXEC="$launcher" "$bin/test_cuda_cli"
else
  note "multi-rank GPU tests: skipped (no mpiexec in the pack or on this machine)"
  failed=1
fi

# ---- tessera.torch on CUDA tensors against the CPU, on one rank and two sharing the GPU: where
# this machine's python3 loads the pack's module (built for the build machine's Python) and its
# torch has CUDA. python3 gets the pack's libraries only, so that torch keeps its own CUDA
# libraries; the CUDA libraries found above come after them only if the module needs them to
# load. Another Python or a torch without CUDA is a skip; any other import failure a failure ----
pymod=$(dirname "$bin")/python
probe_torch() {  # probe_torch LIBRARY_PATH: the import's error, if any, on stdout
  env "LD_LIBRARY_PATH=$1" "PYTHONPATH=$pymod:$root/tests/python" python3 -c 'import torch
import tessera.torch
assert torch.cuda.is_available(), "torch " + torch.__version__ + " has no usable CUDA"' 2>&1 | tail -1
}
if [[ ! -d $pymod/tessera ]]; then
  note "torch_cuda: skipped (no Python module beside the binaries)"
else
  torch_path=${unpacked:+$unpacked/lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  why=$(probe_torch "$torch_path")
  if [[ -n $why && -n ${libpath:-} && $why != *"no usable CUDA"* ]]; then
    torch_path=$libpath
    why=$(probe_torch "$torch_path")
  fi
  if [[ -z $why ]]; then
    torch_env=(env "LD_LIBRARY_PATH=$torch_path" "PYTHONPATH=$pymod:$root/tests/python"
               OMP_NUM_THREADS=2)
    step torch_cuda_np1 90 "${torch_env[@]}" python3 "$root/tests/python/torch_cuda.py"
    if [[ -n $launcher ]]; then
      step torch_cuda_np2 90 "${torch_env[@]}" TESSERA_GPU_COMM=mpi "$launcher" -n 2 python3 \
        "$root/tests/python/torch_cuda.py"
    fi
  elif [[ $why == *"no usable CUDA"* || $why == *"No module named"* ]]; then
    note "torch_cuda: skipped (python3 $(python3 -V 2>&1 | cut -d' ' -f2): $why)"
  else
    note "torch_cuda: failed to import (python3 $(python3 -V 2>&1 | cut -d' ' -f2): $why)"
    failed=1
  fi
fi

# ---- SpMM bandwidth against the copy bandwidth ----
step bench_cuda 60 "${run[@]}" "$bin/bench_cuda" --rows 2000000 --degree 25 --widths 32 128 256

# ---- the synthetic graph, exported in the OGB raw layout for both trainers ----
data=$out/data-$preset
rm -rf "$data"
step dataset 150 "${run[@]}" "$bin/tessera_data" generate --preset "$preset" --out "$data"

# ---- Tessera's GCN on the GPU, when this build trains on the GPU ----
if [[ -d $data ]]; then
  probe=$out/train_gcn_probe.log
  timeout 60 "${run[@]}" "$bin/train_gcn" --dataset "$data" --device cuda --epochs 1 --num-layers 1 \
    --quiet > "$probe" 2>&1
  if grep -q -E "only the CPU backend|no CUDA backend" "$probe"; then
    note "tessera_gcn: --device cuda not available in this build ($(grep -o -m1 -E \
      'only the CPU backend[^"]*|no CUDA backend[^"]*' "$probe"))"
  else
    step tessera_gcn 120 "${run[@]}" "$bin/train_gcn" --dataset "$data" --device cuda \
      --num-layers "$layers" --hidden-channels "$hidden" --epochs "$epochs" \
      --summary "$out/tessera_gcn_summary.json" --quiet
  fi
  # ---- PyTorch Geometric, same graph, same GPU ----
  step pyg_gcn 150 python3 "$here/gpu/pyg_gcn.py" "$data" "$out/pyg_gcn.json" \
    --layers "$layers" --hidden "$hidden" --epochs "$epochs"
  rm -rf "$data"  # gigabytes of CSV: not worth keeping
fi

# ---- graph, pipeline and hybrid with 4 ranks sharing the GPU (--gpu-comm mpi), 8 and 32
# layers: bytes per epoch against the traffic model, epoch times (tables in the log); last, so
# that a long run cannot take the budget of the products-like comparison ----
if [[ -n $launcher ]]; then
  step bench_pipeline 150 "${run[@]}" env TESSERA_MPIEXEC="$launcher" \
    TESSERA_TRAIN_GCN="$bin/train_gcn" TESSERA_PARTITION_GRAPH="$bin/partition_graph" \
    "$bin/bench_pipeline" --dataset synth:arxiv-like --depths 8,32 --ranks 4 --hybrid-stages 2 \
    --device cuda --gpu-comm mpi --hidden-channels 128 --epochs 3 --eval-every 3 \
    --cores "$(nproc)" --json "$out/bench_pipeline.json" --tmpdir "$out"
fi

note "total: $(($(date +%s) - start)) s of a ${budget} s budget"
exit $failed
