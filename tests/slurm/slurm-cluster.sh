#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A one-node Slurm cluster on localhost for the tests: munged, slurmctld and slurmd started as
# root without systemd, every file (configuration, state, spool, logs, pid files, munge key and
# socket) under one directory, so that nothing of the machine's own Slurm set-up is touched.
#
#   tests/slurm/slurm-cluster.sh up      fresh state, start the daemons, wait for an idle node
#   tests/slurm/slurm-cluster.sh down    cancel jobs, stop the daemons by pid (idempotent)
#   tests/slurm/slurm-cluster.sh env     print the export line clients need
#
# TESSERA_SLURM_DIR: the directory (default /tmp/tessera-slurm). TESSERA_SLURM_CPUS: CPUs the
# node advertises (default max(4, nproc)); more than the machine has is allowed
# (SlurmdParameters=config_overrides), so a 4-task job runs on 2 cores. TESSERA_SLURM_PORT:
# slurmctld's port (default 16817; slurmd takes the next one), for two clusters side by side.
# Needs the Debian packages slurmctld, slurmd, slurm-client and munge (slurm-wlm pulls them in).
set -euo pipefail

dir=${TESSERA_SLURM_DIR:-/tmp/tessera-slurm}
conf=$dir/slurm.conf
socket=$dir/run/munge.socket
node=$(hostname -s)
cores=$(nproc)
cpus=${TESSERA_SLURM_CPUS:-$(( cores > 4 ? cores : 4 ))}
port=${TESSERA_SLURM_PORT:-16817}
export SLURM_CONF=$conf

say() { echo "slurm-cluster: $*" >&2; }

# until_true SECONDS COMMAND...: polls every 0.2 s; non-zero when time runs out.
until_true() {
  local limit=$(( $(date +%s) + $1 )); shift
  while ! "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$limit" ] || return 1
    sleep 0.2
  done
}

running() { [ -s "$dir/run/$1.pid" ] && kill -0 "$(cat "$dir/run/$1.pid")" 2>/dev/null; }

write_config() {
  local memory_mb
  memory_mb=$(awk '/^MemTotal/ { printf "%d", $2 / 1024 * 0.75 }' /proc/meminfo)
  cat > "$conf" <<EOF
# One-node test cluster made by tests/slurm/slurm-cluster.sh.
ClusterName=tessera-test
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$(( port + 1 ))
AuthType=auth/munge
CredType=cred/munge
# Our own munged socket. cred_expire also bounds how soon a requeued job can start again.
AuthInfo=socket=$socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# Neither cgroups nor systemd nor accounting: plain processes on one machine.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=pmi2
PropagateResourceLimits=NONE
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=300
MailProg=/bin/true
SlurmdParameters=config_overrides
NodeName=$node CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

up() {
  for daemon in munged slurmctld slurmd; do
    if running "$daemon"; then say "$daemon is already running; run '$0 down' first"; exit 1; fi
  done
  for tool in munged mungekey slurmctld slurmd sbatch scontrol sinfo; do
    command -v "$tool" >/dev/null || { say "missing $tool (apt-get install slurm-wlm munge)"; exit 1; }
  done
  rm -rf "$dir/state" "$dir/spool" "$dir/run" "$dir/log"  # the munge key is kept
  mkdir -p "$dir/state" "$dir/spool" "$dir/run" "$dir/log" "$dir/munge"
  chmod 755 "$dir" "$dir/run"
  chmod 700 "$dir/munge"
  if [ ! -s "$dir/munge/key" ]; then mungekey --create --keyfile="$dir/munge/key" --force; fi
  chmod 600 "$dir/munge/key"
  write_config

  munged --socket="$socket" --key-file="$dir/munge/key" --pid-file="$dir/run/munged.pid" \
         --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
  until_true 10 bash -c "munge -n -S '$socket' | unmunge -S '$socket'" ||
    { say "munged does not answer; see $dir/log/munged.log"; exit 1; }
  slurmctld -f "$conf"
  until_true 20 scontrol ping || { say "slurmctld does not answer; see $dir/log/slurmctld.log"; exit 1; }
  slurmd -f "$conf"
  until_true 30 bash -c "sinfo -h -n '$node' -o %T | grep -qx idle" ||
    { say "node not idle: $(sinfo -h -n "$node" -o '%T %E' 2>&1)"; exit 1; }
  say "up: node $node with $cpus CPUs; export SLURM_CONF=$conf"
}

stop_daemon() {
  local name=$1 pid_file=$dir/run/$1.pid pid
  [ -s "$pid_file" ] || return 0
  pid=$(cat "$pid_file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    if ! until_true 15 bash -c "! kill -0 $pid"; then
      say "$name ($pid) still running after SIGTERM: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pid_file"
}

down() {
  if running slurmctld; then
    local jobs
    jobs=$(squeue -h -o %i 2>/dev/null | xargs) || true
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      until_true 20 bash -c '[ -z "$(squeue -h -o %i)" ]' || say "jobs still listed: $jobs"
    fi
  fi
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged
  rm -f "$socket" "$socket.lock"
  say "down"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
