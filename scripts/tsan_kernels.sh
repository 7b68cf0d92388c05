#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ThreadSanitizer over the OpenMP CPU kernels: a clang tree with -fsanitize=thread (LLVM's
# OpenMP runtime, whose Archer tool tells ThreadSanitizer about OpenMP's barriers and tasks, so
# that only real races are reported), then bench_foundation on a small preset with 4 threads:
# copy, SpMM forward and transposed, GEMM, every elementwise kernel and whole training epochs.
# Exit status 1 on any report. Environment: TESSERA_TSAN_BUILD_DIR (build-tsan), TESSERA_TSAN_THREADS (4).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TESSERA_TSAN_BUILD_DIR:-build-tsan}
archer=$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | sort -V | tail -1 || true)
[ -n "$archer" ] || { echo "tsan_kernels.sh: libarcher.so not found (apt-get install libomp-dev)" >&2; exit 2; }
command -v clang++ >/dev/null || { echo "tsan_kernels.sh: clang++ not found (apt-get install clang)" >&2; exit 2; }
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DTESSERA_SANITIZE=thread -DTESSERA_CUDA=OFF -DTESSERA_BUILD_TESTS=OFF \
  -DTESSERA_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target bench_foundation
report=$build/tsan-report.txt
# OpenBLAS keeps to one thread: its own pthreads pool is not instrumented.
OMP_TOOL_LIBRARIES=$archer OPENBLAS_NUM_THREADS=1 \
  TSAN_OPTIONS="halt_on_error=0 exitcode=66 report_signal_unsafe=0 suppressions=$PWD/scripts/tsan.supp" \
  "$build/bench/bench_foundation" --preset default --threads "${TESSERA_TSAN_THREADS:-4}" \
  --epochs 2 --warmup 1 --repeats 1 --stream-mb 4 --hidden 64 >"$report" 2>&1 && status=0 || status=$?
races=$(grep -c '^WARNING: ThreadSanitizer' "$report" || true)
echo "tsan_kernels.sh: $races ThreadSanitizer reports (bench_foundation exit $status); output in $report"
[ "$status" -eq 0 ] && [ "$races" -eq 0 ]
