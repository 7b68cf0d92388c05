#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_foundation on the small "default" preset with a 16 MB copy test and a 0.1 s refault pause:
# must exit 0, print every table, one JSON line per kind of measurement, and write the same lines
# to --json.
# Usage: bench_foundation_smoke.sh BENCH_FOUNDATION WORK_DIR
set -u
. "$(dirname "$0")/smoke_checks.sh"
bench=$1
work=$2
out=$work/bench_foundation_smoke.out
lines=$work/bench_foundation_smoke.jsonl
rm -f "$out" "$lines"
"$bench" --preset default --threads 2 --epochs 2 --warmup 1 --repeats 1 --stream-mb 16 \
  --refault-pause 0.1 --json "$lines" --tmpdir "$work" >"$out"
status=$?
cat "$out"
check_status "$status" bench_foundation
check_lines "$out" '^# bench_foundation: preset default | threads 2 ' '^| kernel | F | median ms' \
  '^| SpMM | 256 |' '^| SpMM bf16 x | 256 |' '^| SpMM, rcm order | 256 |' '^| SpMM, metis order | 256 |' \
  '^| SpMM, prefetch into l[12] | 256 |' '^CPU kernels: .*), SpMM prefetch l[12]; BLAS' \
  '^| order | compute s | bandwidth |' '^| rcm | ' '^| metis | ' '^| product, layers |' '^| warm-up | timed epochs |' '^| format | file MB' \
  '^| ogb_raw |' '^| hdf5 |' '^## Fresh memory right after freeing and after a 0.1 s pause' \
  '^| 64 | 1 | ' '^## GEMM GFLOP/s with each OpenBLAS core' '^| product, layers | Prescott |'
# --core-rounds 2 (the default): every core's child runs in both rounds.
check_lines "$out" '^{"bench":"gemm_core".*"round":0,' '^{"bench":"gemm_core".*"round":1,' \
  '^{"bench":"gemm_vs_best".*"gflops_this_process"' '^## GEMM GFLOP/s .* best of 2 rounds'
# The SpMM with the gathered rows prefetched into the other cache level: both targets measured.
check_lines "$out" '^{"bench":"spmm".*"prefetch":"l1"' '^{"bench":"spmm".*"prefetch":"l2"'
for kind in dataset train copy spmm node_order gemm gemm_core gemm_vs_best load refault machine; do
  check_lines "$out" "^{\"bench\":\"$kind\""
done
check_json_copy "$out" "$lines"
check_no_scratch "$work"
# Without --stream-mb each copy array is four times the L3 cache found, rounded up to whole MB,
# and at least 256 MB, so that the copy measures DRAM: bytes = 2 arrays of that, no warning.
auto=$work/bench_foundation_smoke_auto.out
"$bench" --preset default --threads 1 --epochs 1 --warmup 0 --repeats 1 --blas-cores none \
  --tmpdir "$work" >"$auto"
check_status $? "bench_foundation without --stream-mb"
copy=$(grep '^{"bench":"copy"' "$auto")
bytes=$(echo "$copy" | sed 's/.*"bytes":\([0-9.e+]*\).*/\1/')
l3=$(echo "$copy" | sed 's/.*"l3_bytes":\([0-9]*\).*/\1/')
if ! awk -v b="$bytes" -v l="$l3" 'BEGIN { mb = int((4 * l + 999999) / 1e6); if (mb < 256) mb = 256
                                            exit !(b == 2e6 * mb) }'; then
  echo "FAIL: the default copy arrays ($bytes bytes in all) are not 2 x max(256 MB, 4 x the L3 of $l3 bytes)" >&2
  exit 1
fi
if grep -q 'WARNING: the copy arrays' "$auto"; then
  echo "FAIL: the default copy arrays were reported too small for the L3 cache" >&2
  exit 1
fi
echo "bench_foundation smoke: OK"
