#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs what scripts/gpu-check.sh needs on a GPU machine that has CUDA but not MPICH, METIS,
# HDF5 or OpenBLAS: the GPU test, benchmark and app binaries of a CUDA build and MPICH's
# launcher (mpiexec and its proxy), plus every shared
# library they load except those the GPU machine provides: the C library's own (glibc: libc,
# libm, libdl, libpthread, librt, libresolv, ...), the compiler's C++ runtime (libstdc++,
# libgcc_s) and the CUDA libraries (cudart, cuBLAS, cuSPARSE, NCCL, nvJitLink; found there by
# gpu-check.sh, in the toolkit or in PyTorch's nvidia wheels). Everything goes into one
# xz-compressed tar, PACK_DIR/tessera-gpu.tar.xz (a few tens of MiB), which gpu-check.sh
# unpacks into a scratch folder; PACK_DIR/BUILD_INFO describes it.
# The build must be portable (-DTESSERA_NATIVE_ARCH=OFF: the GPU machine's CPU is another) and
# compiled for sm_90 (CMAKE_CUDA_ARCHITECTURES containing 90, e.g. 90 or 80;90).
# usage: scripts/gpu/pack.sh BUILD_DIR PACK_DIR
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR PACK_DIR" >&2
  exit 2
fi
build=$1
pack=$2
archive_name=tessera-gpu.tar.xz
binaries=(tests/cuda/test_cuda_kernels tests/cuda/test_cuda_runtime tests/cuda/test_cuda_training
          tests/cuda/test_cuda_codec tests/cuda/test_cuda_attention tests/cuda/test_cuda_distributed
          tests/cuda/test_cuda_distributed_graph
          tests/cuda/test_cuda_cli tests/comm/test_communicator_conformance bench/bench_cuda
          bench/bench_pipeline apps/train_gcn apps/partition_graph
          apps/tessera_data)
# The Python module (tessera and tessera.torch), when the build has it: gpu-check.sh runs
# tessera.torch on CUDA tensors where the GPU machine's python3 (the same version as here) and
# its torch with CUDA can load it.
python_module=$build/python/tessera
modules=()
if [[ -d $python_module ]]; then
  modules=("$python_module"/_core*.so)
else
  echo "pack.sh: $python_module is missing (TESSERA_BUILD_PYTHON=OFF): the pack goes without" \
       "the Python module, and gpu-check.sh skips tessera.torch on the GPU" >&2
fi
# MPICH's launcher, so that the multi-rank GPU tests run there (several ranks on one GPU with
# --gpu-comm mpi): mpiexec finds its proxy beside itself.
launcher=(/usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy)
files=()
for b in "${binaries[@]}"; do
  if [[ ! -x $build/$b ]]; then
    echo "pack.sh: $build/$b is missing: build with TESSERA_CUDA=ON first" >&2
    exit 1
  fi
  files+=("$build/$b")
done
for b in "${launcher[@]}"; do
  if [[ ! -x $b ]]; then
    echo "pack.sh: $b is missing: install MPICH (scripts/setup.sh does)" >&2
    exit 1
  fi
  files+=("$b")
done
cache=$build/CMakeCache.txt
cache_value() { grep -E "^$1:" "$cache" 2>/dev/null | head -1 | cut -d= -f2-; }
native=$(cache_value TESSERA_NATIVE_ARCH)
archs=$(cache_value CMAKE_CUDA_ARCHITECTURES)
if [[ ${native^^} != OFF && ${native^^} != FALSE && $native != 0 ]]; then
  echo "pack.sh: $build was configured with TESSERA_NATIVE_ARCH=${native:-ON} (-march=native):" \
       "its binaries may use instructions the GPU machine's CPU lacks; reconfigure with" \
       "-DTESSERA_NATIVE_ARCH=OFF and rebuild" >&2
  exit 1
fi
if [[ ! ";$archs;" =~ \;(90|90-real|90-virtual|90a|90a-real|all|all-major)\; ]]; then
  echo "pack.sh: $build has CMAKE_CUDA_ARCHITECTURES='$archs', without sm_90 (H100/H200);" \
       "reconfigure with -DCMAKE_CUDA_ARCHITECTURES=90 (or \"80;90\")" >&2
  exit 1
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/tessera-gpu-pack.XXXXXX")
trap 'rm -rf "$stage"' EXIT
top=$stage/tessera-gpu
mkdir -p "$top/bin" "$top/lib"
for f in "${files[@]}"; do cp "$f" "$top/bin/"; done
mv "$top/bin/mpiexec.hydra" "$top/bin/mpiexec"
if ((${#modules[@]})); then
  mkdir -p "$top/python"
  cp -r "$python_module" "$top/python/"
  rm -rf "$top/python/tessera/__pycache__"
fi

# Libraries: what ldd resolves, minus glibc's own, the C++ runtime and the CUDA libraries.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so|libnsl\.so|libnss_|libthread_db\.so|libBrokenLocale\.so|libstdc\+\+\.so|libgcc_s\.so|libcudart|libcublas|libcublasLt|libcusparse|libnccl|libnvJitLink|libcuda\.so|libnvidia-)'
missing=0
declare -A left_out=()
for b in "${files[@]}" "${modules[@]}"; do
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    if [[ $path == "not" ]]; then
      echo "pack.sh: $b needs $name, which is not found here" >&2
      missing=1
      continue
    fi
    if [[ $name =~ $skip ]]; then
      left_out[$name]=1
      continue
    fi
    [[ -e $top/lib/$name ]] || cp -L "$path" "$top/lib/$name"
  done < <(ldd "$b")
done
chmod u+w "$top"/lib/*
strip --strip-unneeded "$top"/bin/* "$top"/lib/* "$top"/python/tessera/*.so 2> /dev/null || true
for f in "$top"/lib/*; do
  if objdump -T "$f" 2> /dev/null | grep GLIBC_PRIVATE > /dev/null; then
    echo "pack.sh: $(basename "$f") uses glibc's private symbols: it only works with this" \
         "machine's glibc; add it to the libraries left out" >&2
    missing=1
  fi
done

# What the GPU machine must provide, for BUILD_INFO (and gpu-check.sh's summary).
needs() {  # highest version of symbol set $1 (GLIBC, GLIBCXX) that the packed files use
  for f in "$top"/bin/* "$top"/lib/*; do objdump -T "$f" 2> /dev/null; done |
    grep -oE "\\b$1_[0-9]+(\\.[0-9]+)*\\b" | sort -Vu | tail -1
}
{
  echo "CUDA architectures: $archs; TESSERA_NATIVE_ARCH=$native"
  echo "commit: $(git -C "$(dirname "$0")/../.." describe --always --dirty 2> /dev/null || echo unknown)"
  echo "built on: $(. /etc/os-release 2> /dev/null && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "needs on the GPU machine: glibc >= $(needs GLIBC | sed 's/^GLIBC_//')," \
       "libstdc++ with $(needs GLIBCXX), and: $(printf '%s\n' "${!left_out[@]}" | sort | tr '\n' ' ')"
  echo "binaries: $(cd "$top/bin" && echo *)"
  echo "libraries: $(cd "$top/lib" && echo *)"
} > "$top/BUILD_INFO"

# One compressed archive; only our own files in PACK_DIR are replaced.
mkdir -p "$pack"
if [[ -f $pack/BUILD_INFO && -x $pack/bin/test_cuda_kernels ]]; then  # an unpacked older pack
  rm -rf "${pack:?}/bin" "${pack:?}/lib"
fi
rm -f "$pack/$archive_name" "$pack/BUILD_INFO"
tar -C "$stage" -cf - tessera-gpu | xz -T0 -6 > "$pack/$archive_name.partial"
mv "$pack/$archive_name.partial" "$pack/$archive_name"
cp "$top/BUILD_INFO" "$pack/BUILD_INFO"
echo "unpacked size: $(du -sh "$top" | cut -f1)"
echo "packed size: $(du -sh "$pack" | cut -f1) ($pack/$archive_name," \
     "$(stat -c %s "$pack/$archive_name") bytes)"
exit $missing
