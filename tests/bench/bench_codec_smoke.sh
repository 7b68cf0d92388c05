#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_codec on the small "default" preset: 2000 kernel rows, 2 ranks, 2 epochs, 1 run, hidden
# 16, codecs none, int8, adaptive. Must exit 0, print both tables with a row per codec, one JSON
# line per measurement (also in --json), write the CSV and leave no scratch directory behind.
# Usage: bench_codec_smoke.sh BENCH_CODEC WORK_DIR
set -u
. "$(dirname "$0")/smoke_checks.sh"
bench=$1
work=$2
out=$work/bench_codec_smoke.out
lines=$work/bench_codec_smoke.jsonl
csv=$work/bench_codec_smoke.csv
rm -f "$out" "$lines" "$csv"
"$bench" --dataset synth:default --rows 2000 --ranks 2 --epochs 2 --runs 1 --hidden-channels 16 \
  --codecs none,int8,adaptive --json "$lines" --csv "$csv" --tmpdir "$work" >"$out"
status=$?
cat "$out"
check_status "$status" bench_codec
check_lines "$out" '^## Codec kernels' '^| codec | encode GB/s |' '^## Training' \
  '^| codec | halo MB/epoch |' \
  '^| none | ' '^| bf16 | ' '^| fp16 | ' '^| int8 | ' '^| int4 | ' '^| int2 | ' \
  '^| adaptive (budget 4) | ' '^{"bench":"timing"'
if [ "$(grep -c '^{"bench":"codec_kernel"' "$out")" -ne 6 ]; then
  echo "FAIL: expected 6 codec_kernel JSON lines" >&2
  exit 1
fi
if [ "$(grep -c '^{"bench":"codec_training"' "$out")" -ne 3 ]; then
  echo "FAIL: expected 3 codec_training JSON lines (none, int8, adaptive)" >&2
  exit 1
fi
if [ "$(grep -c '^| int8 | ' "$out")" -ne 2 ] || [ "$(grep -c '^| none | ' "$out")" -ne 2 ]; then
  echo "FAIL: expected none and int8 rows in both tables" >&2
  exit 1
fi
if [ "$(wc -l <"$csv")" -ne 4 ] || ! head -1 "$csv" | grep -q '^codec,bytes_per_epoch,ratio,accuracy,accuracy_std$'; then
  echo "FAIL: the CSV should hold a header and 3 rows" >&2
  exit 1
fi
check_json_copy "$out" "$lines"
check_no_scratch "$work"
echo "bench_codec smoke: OK"
