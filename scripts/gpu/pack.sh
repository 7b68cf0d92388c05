#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU machine that has CUDA but not MPICH, METIS,
# HDF5 or OpenBLAS: the GPU test, benchmark and app binaries of a CUDA build, plus every shared
# library they load except the C library and the CUDA libraries the GPU machine provides
# (cudart, cuBLAS, cuSPARSE, NCCL, nvJitLink; found there by gpu-check.sh).
# usage: scripts/gpu/pack.sh BUILD_DIR PACK_DIR
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR PACK_DIR" >&2
  exit 2
fi
build=$1
pack=$2
binaries=(tests/cuda/test_cuda_kernels tests/cuda/test_cuda_runtime
          tests/comm/test_communicator_conformance bench/bench_cuda apps/train_gcn
          apps/tessera_data)
for b in "${binaries[@]}"; do
  if [[ ! -x $build/$b ]]; then
    echo "pack.sh: $build/$b is missing: build with TESSERA_CUDA=ON first" >&2
    exit 1
  fi
done
rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib"
for b in "${binaries[@]}"; do cp "$build/$b" "$pack/bin/"; done
# Libraries: what ldd resolves, minus glibc's own and the CUDA runtime libraries.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libcudart|libcublas|libcublasLt|libcusparse|libnccl|libnvJitLink|libcuda\.so)'
missing=0
for b in "${binaries[@]}"; do
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    if [[ $path == "not" ]]; then
      echo "pack.sh: $b needs $name, which is not found here" >&2
      missing=1
      continue
    fi
    [[ $name =~ $skip ]] && continue
    [[ -e $pack/lib/$name ]] || cp -L "$path" "$pack/lib/$name"
  done < <(ldd "$build/$b")
done
strip --strip-unneeded "$pack"/bin/* "$pack"/lib/* 2>/dev/null || true
echo "CUDA architectures: $(grep -E '^CMAKE_CUDA_ARCHITECTURES' "$build/CMakeCache.txt" | cut -d= -f2)" \
  > "$pack/BUILD_INFO"
git -C "$(dirname "$0")/../.." rev-parse HEAD >> "$pack/BUILD_INFO" 2>/dev/null || true
du -sh "$pack" | cut -f1 | sed 's/^/packed size: /'
exit $missing
