#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_pipeline on the small "default" preset at 4 ranks: depths 4 and 8, graph, pipeline and
# hybrid (2 parts x 2 stages), 2 epochs, hidden 16. Must exit 0, print every table with a row per
# depth and mode, one JSON line per run and one graph_vs_pipeline line per depth (also in
# --json), write the CSV and leave no scratch directory behind.
# Usage: bench_pipeline_smoke.sh BENCH_PIPELINE WORK_DIR
set -u
. "$(dirname "$0")/smoke_checks.sh"
bench=$1
work=$2
out=$work/bench_pipeline_smoke.out
lines=$work/bench_pipeline_smoke.jsonl
csv=$work/bench_pipeline_smoke.csv
rm -f "$out" "$lines" "$csv"
"$bench" --dataset synth:default --ranks 4 --depths 4,8 --epochs 2 --eval-every 1 \
  --hidden-channels 16 --json "$lines" --csv "$csv" --tmpdir "$work" >"$out"
status=$?
cat "$out"
check_status "$status" bench_pipeline
check_lines "$out" '^# bench_pipeline | synth:default, K = 4 ranks' '^## Partitions (METIS)' \
  '^| 2 | hybrid | ' '^| 4 | pipeline | ' '^| depth | mode | halo nodes | halo fwd MB |' \
  '^| depth | mode | parts x stages (chunks) | epoch ms |' '^| depth | graph MB | pipeline MB |' \
  '^| 8 | graph | ' '^| 8 | pipeline | ' '^| 8 | hybrid | ' '^{"bench":"timing"'
if [ "$(grep -c '^{"bench":"parallel_mode"' "$out")" -ne 6 ]; then
  echo "FAIL: expected 6 parallel_mode JSON lines (depths 4, 8 x 3 modes)" >&2
  exit 1
fi
if grep '^{"bench":"parallel_mode"' "$out" | grep -q '"error"'; then
  echo "FAIL: a run failed" >&2
  exit 1
fi
if [ "$(grep -c '^{"bench":"graph_vs_pipeline"' "$out")" -ne 2 ]; then
  echo "FAIL: expected 2 graph_vs_pipeline JSON lines (depths 4, 8)" >&2
  exit 1
fi
if [ "$(grep -c '^{"bench":"partition"' "$out")" -ne 2 ]; then
  echo "FAIL: expected 2 partition JSON lines (4 parts for graph, 2 for hybrid)" >&2
  exit 1
fi
if [ "$(wc -l <"$csv")" -ne 7 ] ||
   ! head -1 "$csv" | grep -q '^depth,mode,bytes_per_epoch,model_bytes_per_epoch,'; then
  echo "FAIL: the CSV should hold a header and 6 rows" >&2
  exit 1
fi
check_json_copy "$out" "$lines"
check_no_scratch "$work"
echo "bench_pipeline smoke: OK"
