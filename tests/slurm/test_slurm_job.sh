#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project's own sbatch template on a real one-node Slurm cluster (slurm-cluster.sh):
#  1. `sbatch --wait` of a 4-task job: partition step, training step, exit 0, the summary of the
#     expected epochs and ranks, the output file keyed by the job id;
#  2. a longer 4-task job sent `scancel --signal=USR1` mid-training: it checkpoints, exits 75,
#     requeues itself, runs again (SLURM_RESTART_COUNT=1), resumes from the checkpoint and
#     finishes with every epoch in its metrics and summary;
#  3. the same with a 4-stage pipeline (--parallel pipeline, one graph part): stopped, requeued,
#     resumed with the stages' weights and historical buffers, finished;
#  4. the sweep template as a 2-point job array over settings files (train_gcn --config): each
#     point's summary has its settings and array task, scripts/sweep_table.py lists both, and
#     submitting the array again skips the finished points.
# The cluster is torn down however the test ends. Exit 77 (skipped) when not root or when Slurm
# and munge are not installed.
#   test_slurm_job.sh APPS_DIR SOURCE_DIR
set -uo pipefail
apps=$1
source_dir=$2
if [ "$(id -u)" -ne 0 ]; then echo "skipped: needs root to run the Slurm daemons"; exit 77; fi
for tool in munged slurmctld slurmd sbatch scontrol scancel; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool not installed (slurm-wlm, munge)"; exit 77; }
done

export TESSERA_SLURM_DIR=${TESSERA_SLURM_DIR:-$(mktemp -d /tmp/tessera-slurm-test.XXXXXX)}
export TESSERA_SLURM_PORT=${TESSERA_SLURM_PORT:-$(( 20000 + $$ % 20000 ))}
cluster=$source_dir/tests/slurm/slurm-cluster.sh
template=$source_dir/apps/slurm/tessera-cpu.sbatch
work=$TESSERA_SLURM_DIR/jobs
export SLURM_CONF=$TESSERA_SLURM_DIR/slurm.conf

finish() {
  "$cluster" down || true
  rm -rf "$TESSERA_SLURM_DIR"
}
trap finish EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.out; do echo "--- $f"; cat "$f"; done; exit 1; }

"$cluster" up || fail "the cluster did not start"
mkdir -p "$work"
cd "$work" || exit 1
common="ALL,TESSERA_BIN=$apps,OMP_NUM_THREADS=1,OPENBLAS_NUM_THREADS=1"
model="--dataset synth:default --hidden-channels 32 --num-layers 2 --quiet"

# 1. A 4-task job, start to end.
start=$(date +%s)
job=$(sbatch --parsable --wait --export="$common,TESSERA_WORK=$work/one" "$template" $model --epochs 20)
status=$?
echo "job $job: exit $status after $(( $(date +%s) - start )) s"
[ "$status" -eq 0 ] || fail "job $job exited $status"
out=$work/tessera-$job.out
[ -f "$out" ] || fail "no output file tessera-$job.out"
grep -q "Launch: rank 0 of 4 (local 0 of 4), Slurm job $job (srun)" "$out" || fail "launch line"
grep -q "Final Test:" "$out" || fail "no final report in $out"
python3 - "$work/one/summary.json" <<'PY' || fail "summary of job $job"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["epochs"] == 20 and s["ranks"] == 4, (s["epochs"], s["ranks"])
assert s["partition"]["method"] == "metis", s["partition"]
print("summary: 4 ranks, 20 epochs, final test", s["final_test_acc"])
PY

# Waits until job $1 (writing $2/metrics.jsonl) has trained 20 epochs, sends it the warning
# signal, waits until it has requeued itself, run again and completed, and checks the stop, the
# requeue and the resume in its output file.
stop_requeue_resume() {
  local job=$1 folder=$2 start state restarts out
  start=$(date +%s)
  until [ "$(cat "$folder/metrics.jsonl" 2>/dev/null | wc -l)" -ge 20 ]; do
    [ $(( $(date +%s) - start )) -lt 120 ] || fail "job $job did not start training"
    sleep 0.2
  done
  scancel --signal=USR1 "$job" || fail "scancel $job"
  echo "job $job: SIGUSR1 after $(( $(date +%s) - start )) s"
  state=""
  until [ "$state" = COMPLETED ]; do
    state=$(scontrol show job "$job" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case "$state" in FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) fail "job $job: $state";; esac
    [ $(( $(date +%s) - start )) -lt 240 ] || fail "job $job not done after 240 s ($state)"
    sleep 1
  done
  echo "job $job: completed after $(( $(date +%s) - start )) s"
  restarts=$(scontrol show job "$job" | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
  [ "$restarts" = 1 ] || fail "job $job restarted $restarts times, expected 1"
  out=$work/tessera-$job.out
  # Slurm signals every task; rank 0 reports SIGUSR1 itself, or, when another rank saw it first
  # at the epoch's agreement, the stop of that rank.
  grep -qE "Stopped by (SIGUSR1|a stop signal on another rank) after run 1, epoch" "$out" ||
    fail "job $job: no stop line"
  grep -q "requeueing job $job" "$out" || fail "job $job: no requeue"
  grep -q "restart 1, 4 tasks" "$out" || fail "job $job: no second start"
  grep -q "Resuming from $folder/checkpoints/checkpoint-r0000-e" "$out" || fail "job $job: no resume"
  grep -q "train_gcn exited with status 0" "$out" || fail "job $job: second start did not finish"
}

# 2. The warning signal mid-training: checkpoint, requeue, resume, finish.
epochs=600
job=$(sbatch --parsable --export="$common,TESSERA_WORK=$work/two,TESSERA_CHECKPOINT_EVERY=100" \
      "$template" $model --epochs $epochs) || fail "sbatch"
stop_requeue_resume "$job" "$work/two"
python3 - "$work/two" $epochs <<'PY' || fail "outputs of job $job"
import json, sys
folder, epochs = sys.argv[1], int(sys.argv[2])
s = json.load(open(folder + "/summary.json"))
assert s["epochs"] == epochs and s["ranks"] == 4, (s["epochs"], s["ranks"])
lines = [json.loads(l) for l in open(folder + "/metrics.jsonl")]
assert [l["epoch"] for l in lines] == list(range(1, epochs + 1)), "metrics epochs"
print("requeued job: %d metrics lines, final test %.4f" % (len(lines), s["final_test_acc"]))
PY
# 3. A pipelined job (4 stages over one graph part) stopped, requeued and resumed the same way.
epochs=1000
pipe_model="--dataset synth:default --hidden-channels 32 --num-layers 4 --quiet --parallel pipeline"
job=$(sbatch --parsable --export="$common,TESSERA_WORK=$work/pipe,TESSERA_PARTS=1,TESSERA_CHECKPOINT_EVERY=200" \
      "$template" $pipe_model --epochs $epochs) || fail "sbatch (pipeline)"
stop_requeue_resume "$job" "$work/pipe"
grep -q "holds no historical buffers" "$work/tessera-$job.out" && fail "pipeline resumed without its buffers"
python3 - "$work/pipe" $epochs <<'PY' || fail "outputs of job $job"
import json, sys
folder, epochs = sys.argv[1], int(sys.argv[2])
s = json.load(open(folder + "/summary.json"))
assert s["epochs"] == epochs and s["ranks"] == 4, (s["epochs"], s["ranks"])
assert s["parallel"] == "pipeline" and s["stages"] == 4, (s["parallel"], s["stages"])
lines = [json.loads(l) for l in open(folder + "/metrics.jsonl")]
assert [l["epoch"] for l in lines] == list(range(1, epochs + 1)), "metrics epochs"
print("requeued pipeline job: %d metrics lines, final test %.4f" % (len(lines), s["final_test_acc"]))
PY

# 4. A sweep: a job array of two points, one settings file each.
sweep=$work/sweep
mkdir -p "$sweep"
printf 'hidden_channels = 16\nlr = 0.02\n' > "$sweep/small.toml"
printf 'hidden_channels = 32\nlr = 0.01\n' > "$sweep/large.toml"
printf '# two points\nsmall.toml\n\nlarge.toml\n' > "$sweep/points.txt"
sweep_template=$source_dir/apps/slurm/tessera-sweep.sbatch
sweep_flags="--dataset synth:default --num-layers 2 --epochs 5 --quiet"
job=$(sbatch --parsable --wait --array=0-1 --export="$common,TESSERA_WORK=$sweep/out" \
      "$sweep_template" "$sweep/points.txt" $sweep_flags) || fail "sweep job array"
python3 - "$sweep/out" "$job" <<'PY' || fail "sweep outputs of job $job"
import json, sys
folder, job = sys.argv[1], sys.argv[2]
for task, hidden in ((0, 16), (1, 32)):
    s = json.load(open("%s/task-%d/summary.json" % (folder, task)))
    assert s["hidden_channels"] == hidden and s["epochs"] == 5, (task, s["hidden_channels"])
    assert s["provenance"]["slurm_array_task"] == "%s_%d" % (job, task), s["provenance"]
print("sweep: 2 points, array job", job)
PY
table=$(python3 "$source_dir/scripts/sweep_table.py" "$sweep/out") || fail "sweep_table.py"
echo "$table"
[ "$(echo "$table" | grep -c '^task-')" = 2 ] || fail "sweep table rows"
echo "$table" | grep -q "hidden_channels=32 lr=0.01" || fail "sweep table settings"
echo "$table" | grep -q "best valid" || fail "sweep table best"
again=$(sbatch --parsable --wait --array=0-1 --export="$common,TESSERA_WORK=$sweep/out" \
        "$sweep_template" "$sweep/points.txt" $sweep_flags) || fail "sweep again"
grep -q "already done" "$work/tessera-sweep-${again}_1.out" || fail "finished point not skipped"
echo "PASS"
