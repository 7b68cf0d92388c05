#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_graph_parallel on the small "default" preset at 1 and 2 ranks (METIS and random, 2 timed
# epochs, hidden 16, nodes in RCM order and in the dataset's): must exit 0, print every table
# with a row per configuration, one JSON line per configuration and order, write the same lines
# to --json, and leave no scratch directory behind.
# Usage: bench_graph_parallel_smoke.sh BENCH_GRAPH_PARALLEL WORK_DIR
set -u
. "$(dirname "$0")/smoke_checks.sh"
bench=$1
work=$2
out=$work/bench_graph_parallel_smoke.out
lines=$work/bench_graph_parallel_smoke.jsonl
rm -f "$out" "$lines"
"$bench" --datasets synth:default --ranks 1,2 --epochs 2 --hidden-channels 16 \
  --node-orders rcm,none --json "$lines" --tmpdir "$work" >"$out"
status=$?
cat "$out"
check_status "$status" bench_graph_parallel
check_lines "$out" '^# bench_graph_parallel: GCN, 3 layers, hidden 16 ' \
  '^| dataset | K | method | edge cut | halo nodes' '^| dataset | K | method | threads/rank' \
  '^| dataset | K | method | halo nodes | ' '^| synth:default | 1 | none |' \
  '^| synth:default | 2 | metis |' '^| synth:default | 2 | random |' \
  '^{"bench":"metis_vs_random"' '^{"bench":"machine"' '^## Node order' \
  '^| synth:default | 2 | random | none |' '^{"bench":"node_order".*"order":"none"'
if [ "$(grep -c '^{"bench":"graph_parallel"' "$out")" -ne 6 ]; then
  echo "FAIL: expected 6 graph_parallel JSON lines (1 rank; 2 ranks metis, random; 2 orders)" >&2
  exit 1
fi
check_json_copy "$out" "$lines"
check_no_scratch "$work"
echo "bench_graph_parallel smoke: OK"
