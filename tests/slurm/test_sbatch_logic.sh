#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The batch templates' own logic, without Slurm: each template runs under bash with a fake srun
# and scontrol first on PATH (they log their arguments; srun plays partition_graph and a
# train_gcn that ends as told) and a simulated job environment. Checked for tessera-cpu and
# tessera-gpu: the training step gets --cpus-per-task from SLURM_CPUS_PER_TASK (and
# SRUN_CPUS_PER_TASK), --mpi only when TESSERA_SRUN_MPI names one; a stop (exit 75) after a newer
# checkpoint requeues the job; a stop without one (no progress possible) and a job at
# TESSERA_MAX_REQUEUES do not, exit 1 and say why; a finished run exits 0 and does not requeue.
# Usage: test_sbatch_logic.sh SOURCE_DIR
set -uo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

mkdir -p "$work/bin"
cat > "$work/bin/srun" <<'EOF'
#!/usr/bin/env bash
echo "srun $* SRUN_CPUS_PER_TASK=${SRUN_CPUS_PER_TASK:-unset}" >> "$FAKE_LOG"
args=("$@")
for ((i = 0; i < ${#args[@]}; ++i)); do
  case ${args[i]} in
    --out) mkdir -p "${args[i + 1]}" && touch "${args[i + 1]}/meta.json"; exit 0 ;;
    --checkpoint-dir) checkpoints=${args[i + 1]} ;;
  esac
done
mkdir -p "$checkpoints"
case $FAKE_TRAIN in
  done) exit 0 ;;
  stuck) exit 75 ;;  # stopped before finishing an epoch: no newer checkpoint
  progress)
    epoch=$(( $(ls "$checkpoints" | wc -l) * 10 + 10 ))
    touch "$checkpoints/$(printf 'checkpoint-r0000-e%06d.h5' "$epoch")"
    exit 75 ;;
esac
EOF
printf '#!/usr/bin/env bash\necho "scontrol $*" >> "$FAKE_LOG"\n' > "$work/bin/scontrol"
chmod +x "$work/bin/srun" "$work/bin/scontrol"

# run TEMPLATE CASE BEHAVIOUR [NAME=VALUE...]: runs the template in its own work folder; sets
# $status, $log (srun and scontrol lines) and $out (the template's stdout and stderr).
run() {
  local template=$1 name=$2 behaviour=$3
  shift 3
  local dir="$work/$template-$name"
  mkdir -p "$dir/work/checkpoints"
  touch "$dir/work/checkpoints/checkpoint-r0000-e000005.h5"  # an earlier attempt's
  : > "$dir/log"
  out=$(env PATH="$work/bin:$PATH" FAKE_LOG="$dir/log" FAKE_TRAIN="$behaviour" \
        SLURM_JOB_ID=77 SLURM_NTASKS=4 SLURM_CPUS_PER_TASK=3 TESSERA_WORK="$dir/work" \
        TESSERA_BIN=/opt/tessera/bin "$@" bash "$src/apps/slurm/$template.sbatch" --epochs 50 2>&1)
  status=$?
  log=$(cat "$dir/log")
}
train_line() { grep 'train_gcn' <<<"$log" | head -n 1; }

for template in tessera-cpu tessera-gpu; do
  echo "== $template"
  run "$template" progress progress
  [ "$status" -eq 75 ] || fail "$template, progress: exit $status, expected 75: $out"
  grep -qx 'scontrol requeue 77' <<<"$log" || fail "$template, progress: no requeue: $log"
  train_line | grep -q -- '--cpus-per-task=3 ' || fail "$template: no --cpus-per-task=3: $log"
  train_line | grep -q 'SRUN_CPUS_PER_TASK=3$' || fail "$template: SRUN_CPUS_PER_TASK: $log"
  train_line | grep -q -- '--mpi' && fail "$template: --mpi without TESSERA_SRUN_MPI: $log"
  train_line | grep -q -- '--epochs 50' || fail "$template: the flags did not reach train_gcn"
  if [ "$template" = tessera-gpu ]; then
    train_line | grep -q -- '--device cuda ' || fail "$template: no --device cuda: $log"
  fi
  grep -q 'checkpoint-r0000-e000020.h5 written; requeueing' <<<"$out" ||
    fail "$template, progress: message: $out"

  run "$template" mpi progress TESSERA_SRUN_MPI=pmix
  train_line | grep -q -- '--mpi=pmix ' || fail "$template: TESSERA_SRUN_MPI=pmix not passed: $log"

  run "$template" stuck stuck
  [ "$status" -eq 1 ] || fail "$template, stuck: exit $status, expected 1: $out"
  grep -q 'scontrol' <<<"$log" && fail "$template, stuck: requeued: $log"
  grep -q 'without a newer checkpoint than checkpoint-r0000-e000005.h5' <<<"$out" ||
    fail "$template, stuck: message: $out"

  run "$template" cap progress SLURM_RESTART_COUNT=3 TESSERA_MAX_REQUEUES=3
  [ "$status" -eq 1 ] || fail "$template, cap: exit $status, expected 1: $out"
  grep -q 'scontrol' <<<"$log" && fail "$template, cap: requeued: $log"
  grep -q 'requeued 3 times (TESSERA_MAX_REQUEUES=3); not requeueing' <<<"$out" ||
    fail "$template, cap: message: $out"
  run "$template" below-cap progress SLURM_RESTART_COUNT=2 TESSERA_MAX_REQUEUES=3
  grep -qx 'scontrol requeue 77' <<<"$log" || fail "$template, below the cap: no requeue: $log"

  run "$template" done done
  [ "$status" -eq 0 ] || fail "$template, done: exit $status: $out"
  grep -q 'scontrol' <<<"$log" && fail "$template, done: requeued: $log"

  run "$template" no-requeue progress TESSERA_REQUEUE=0
  [ "$status" -eq 75 ] || fail "$template, TESSERA_REQUEUE=0: exit $status: $out"
  grep -q 'scontrol' <<<"$log" && fail "$template, TESSERA_REQUEUE=0: requeued: $log"
done
echo "sbatch logic: OK"
