#!/bin/sh
# bench_foundation on the small "default" preset with a 16 MB copy test: must exit 0, print every
# table, one JSON line per kind of measurement, and write the same lines to --json.
# Usage: bench_foundation_smoke.sh BENCH_FOUNDATION WORK_DIR
set -u
bench=$1
work=$2
out=$work/bench_foundation_smoke.out
lines=$work/bench_foundation_smoke.jsonl
rm -f "$out" "$lines"
"$bench" --preset default --threads 2 --epochs 2 --warmup 1 --repeats 1 --stream-mb 16 \
  --json "$lines" --tmpdir "$work" >"$out"
status=$?
cat "$out"
if [ "$status" -ne 0 ]; then
  echo "FAIL: bench_foundation exited with status $status" >&2
  exit 1
fi
for header in '^# bench_foundation: preset default | threads 2 ' '^| kernel | F | median ms' \
    '^| SpMM | 256 |' '^| product, layers |' '^| warm-up | timed epochs |' '^| format | file MB' \
    '^| ogb_raw |' '^| hdf5 |'; do
  grep -q "$header" "$out" || { echo "FAIL: no line matching '$header'" >&2; exit 1; }
done
for kind in dataset train copy spmm gemm load machine; do
  grep -q "^{\"bench\":\"$kind\"" "$out" || { echo "FAIL: no JSON line for $kind" >&2; exit 1; }
done
if [ "$(grep -c '^{' "$out")" -ne "$(grep -c '^{' "$lines")" ]; then
  echo "FAIL: --json file does not hold the JSON lines printed on stdout" >&2
  exit 1
fi
if ls "$work" | grep -q '^tessera_bench_'; then
  echo "FAIL: the scratch directory was left behind in $work" >&2
  exit 1
fi
echo "bench_foundation smoke: OK"
