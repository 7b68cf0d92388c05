#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets of fuzz/ (clang, AddressSanitizer + UBSan) and runs each for a
# given time, then prints a row per target: CPU seconds, executions, coverage, corpus, findings.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (default 60 s each; every target:
#        raw_dataset hdf5_dataset part_store checkpoint message), one after the other.
# Seeds come from real files: a cut of Cora (fuzz/make_seeds.py), converted, partitioned and
# trained on by this build's own programs. Environment: TESSERA_FUZZ_BUILD_DIR (build-fuzz),
# TESSERA_FUZZ_WORK (fuzz-work: seeds/, corpus/, findings/, logs/), TESSERA_SHARED_DATASETS
# (../shared/datasets). Exit status 1 when a target found something in Tessera: each input is
# in WORK/findings/ (replay one with BUILD/fuzz/fuzz_TARGET FILE; once fixed, add it to
# tests/fuzz/inputs/TARGET/, which test_fuzz_inputs replays). Reports inside libhdf5 are
# counted apart (docs/fuzzing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(raw_dataset hdf5_dataset part_store checkpoint message)
build=${TESSERA_FUZZ_BUILD_DIR:-build-fuzz}
work=${TESSERA_FUZZ_WORK:-fuzz-work}
datasets=${TESSERA_SHARED_DATASETS:-../shared/datasets}
[ -d "$datasets/cora" ] || { echo "fuzz.sh: $datasets/cora: not found (set TESSERA_SHARED_DATASETS)" >&2; exit 2; }
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 2; }

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DTESSERA_FUZZ=ON -DTESSERA_CUDA=OFF -DTESSERA_BUILD_TESTS=OFF \
  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null

# Seeds: allocations HDF5 cannot make fail as in a normal build (null, then an HDF5 error).
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
export LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan.supp
seeds=$work/seeds
if [ ! -f "$seeds/.done" ]; then
  rm -rf "$seeds" && mkdir -p "$seeds"/{hdf5_dataset,part_store,checkpoint,message} "$seeds/files"
  fuzz/make_seeds.py --dataset "$datasets/cora" --out "$seeds"
  cut=$seeds/cut/cora-cut
  quiet=(env ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0)
  "${quiet[@]}" "$build/apps/tessera_data" convert --dataset "$cut" --out "$seeds/hdf5_dataset/cut.h5" >/dev/null
  for parts in "2 metis" "3 random"; do
    set -- $parts
    "${quiet[@]}" "$build/apps/partition_graph" --dataset "$cut" --parts "$1" --partition "$2" \
      --out "$seeds/files/store-$1" --quiet >/dev/null
    cp "$seeds/files/store-$1/meta.json" "$seeds/part_store/meta-$1.json"
    for f in "$seeds/files/store-$1"/part-*.h5; do cp "$f" "$seeds/part_store/$1-$(basename "$f")"; done
  done
  "${quiet[@]}" "$build/apps/train_gcn" --dataset "$cut" --epochs 4 --hidden-channels 16 \
    --checkpoint-dir "$seeds/files/checkpoints" --checkpoint-every 2 --quiet >/dev/null 2>&1
  "${quiet[@]}" "$build/apps/train_gcn" --dataset "$cut" --epochs 2 --hidden-channels 8 --batch-norm \
    --restore-best --checkpoint-dir "$seeds/files/checkpoints-bn" --quiet >/dev/null 2>&1
  # A pipelined one (one rank: one stage over two chunks) holds the historical buffers too.
  "${quiet[@]}" "$build/apps/train_gcn" --dataset "$cut" --epochs 2 --hidden-channels 8 \
    --parallel pipeline --chunks 2 --checkpoint-dir "$seeds/files/checkpoints-pipe" --quiet >/dev/null 2>&1
  cp "$seeds/files/checkpoints/"*.h5 "$seeds/checkpoint/"
  for f in "$seeds/files/checkpoints-pipe/"*.h5; do cp "$f" "$seeds/checkpoint/pipe-$(basename "$f")"; done
  for f in "$seeds/files/checkpoints-bn/"*.h5; do cp "$f" "$seeds/checkpoint/bn-$(basename "$f")"; done
  "${quiet[@]}" "$build/fuzz/write_message_seeds" "$cut" "$seeds/message"
  touch "$seeds/.done"
fi

# The first frame of a finding's report below the allocator and the sanitizer's interceptors: a
# finding whose bad access or allocation happens inside libhdf5 is HDF5's own (filed apart, in
# WORK/findings/hdf5-library/), every other one is Tessera's.
# An out-of-memory report has no allocation stack: the input runs again with the malloc limit at
# the memory limit, so that one allocation too large is reported where it is made (libFuzzer's
# own frames are skipped; an input that reaches the limit by many smaller allocations stays
# counted as Tessera's).
culprit() {
  local report malloc_limit=1048576
  [[ $(basename "$2") == *oom-* ]] && malloc_limit=2560
  report=$("$build/fuzz/fuzz_$1" -rss_limit_mb=2560 -malloc_limit_mb=$malloc_limit "$2" 2>&1 || true)
  grep -E '^ +#[0-9]+ ' <<<"$report" |
    grep -v -E ' in (__interceptor_|malloc|calloc|realloc|free|strdup|operator new|operator delete|__asan|__ubsan|__sanitizer|__mem|fuzzer::)' |
    sed -n 1p
}

mkdir -p "$work/findings/hdf5-library" "$work/logs"
status=0
printf '%-14s %8s %12s %8s %8s %9s %6s\n' target cpu_s executions coverage corpus findings hdf5
for t in "${targets[@]}"; do
  [ -x "$build/fuzz/fuzz_$t" ] || { echo "fuzz.sh: unknown target '$t'" >&2; exit 2; }
  mkdir -p "$work/corpus/$t"
  log=$work/logs/$t.log
  # Fork mode: a finding is saved and fuzzing goes on, so every target gets its whole time.
  /usr/bin/time -f '%U %S' -o "$work/logs/$t.time" \
    "$build/fuzz/fuzz_$t" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2560 -malloc_limit_mb=1048576 \
    -artifact_prefix="$work/findings/$t-" "$work/corpus/$t" "$seeds/$t" >"$log" 2>&1 || true
  cpu=$(tail -1 "$work/logs/$t.time" | awk '{printf "%.0f", $1 + $2}')
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
  runs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
  cov=$(sed -E 's/.* cov: ([0-9]+) .*/\1/' <<<"$last")
  corpus=$(find "$work/corpus/$t" -type f | wc -l)
  ours=0
  hdf5=0
  for f in "$work/findings/$t"-*; do
    [ -f "$f" ] || continue
    if [[ $(culprit "$t" "$f") == *libhdf5* ]]; then
      mv "$f" "$work/findings/hdf5-library/"
      hdf5=$((hdf5 + 1))
    else
      ours=$((ours + 1))
    fi
  done
  [ "$ours" -gt 0 ] && status=1
  printf '%-14s %8s %12s %8s %8s %9s %6s\n' "$t" "$cpu" "${runs:-?}" "${cov:-?}" "$corpus" "$ours" "$hdf5"
done
exit $status
