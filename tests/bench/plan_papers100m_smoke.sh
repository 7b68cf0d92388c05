#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# plan_papers100m on a tiny probe (hidden 16, 256 probe rows), 16 ranks, one halo ratio, two
# codecs: must exit 0 and print its table with a row per codec.
# Usage: plan_papers100m_smoke.sh PLAN_PAPERS100M WORK_DIR
set -u
. "$(dirname "$0")/smoke_checks.sh"
out=$2/plan_papers100m_smoke.out
"$1" --ranks 16 --halo-ratios 1 --codecs none bf16 --hidden 16 --probe-rows 256 >"$out"
status=$?
cat "$out"
check_status "$status" plan_papers100m
check_lines "$out" '^ogbn-papers100M: 111059956 nodes' '^| ranks | halo rows / owned |' \
  '^| 16 | 1.0 | none | [0-9.]* | \(yes\|no\) |' '^| 16 | 1.0 | bf16 | [0-9.]* | \(yes\|no\) |'
