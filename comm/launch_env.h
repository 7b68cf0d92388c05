// SPDX-License-Identifier: Apache-2.0
// LaunchEnv: where this rank stands in the job, from MPI first, with Slurm's variables
// (SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_JOB_ID,
// SLURM_CPUS_PER_TASK, SLURM_RESTART_COUNT) read and cross-checked when present. Works under
// `srun --mpi=pmi2` (every task has its own SLURM_PROCID, which must equal its MPI rank) and
// under `mpiexec` inside an allocation (Hydra starts its proxies with srun, so every rank on a
// node inherits the proxy's SLURM_PROCID: no per-rank check applies). Relies on Communicator.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace tessera {

struct LaunchEnv {
  int rank = 0;             // from MPI
  int size = 1;             // from MPI
  int local_rank = 0;       // on this node: SLURM_LOCALID under srun, else MPI's shared-memory split
  int local_size = 1;       // ranks on this node (MPI)
  bool slurm = false;       // inside a Slurm job (SLURM_JOB_ID set)
  bool srun = false;        // the ranks are the tasks of one srun step
  std::string job_id;       // SLURM_JOB_ID
  int slurm_tasks = 0;      // SLURM_NTASKS (0: not set)
  int cpus_per_task = 0;    // SLURM_CPUS_PER_TASK (0: not set): compute threads per rank
  int restart_count = 0;    // SLURM_RESTART_COUNT: times the job was requeued
  std::string array_task;   // "JOB_TASK" from SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID, or ""
};

// Reads an environment variable; null when unset (std::getenv by default; tests inject values).
using EnvLookup = std::function<const char*(const char* name)>;

// Collective over comm (one all-reduce, one agreement). local_rank / local_size: this rank's
// place among the ranks sharing its node (MPI_COMM_TYPE_SHARED). Throws AgreedError on every
// rank, naming the variable, the rank and what disagrees, when a Slurm variable is malformed or
// contradicts MPI (tasks of an srun step that did not join one MPI job, SLURM_PROCID other than
// the MPI rank, a task count other than the MPI size).
LaunchEnv detect_launch_env(Communicator& comm, int local_rank, int local_size,
                            const EnvLookup& env = {});

// One line for logs: "rank 0 of 4 (local 0 of 4), Slurm job 17 (srun, restart 1)".
std::string describe(const LaunchEnv& env);

// Every rank's host name, in rank order, the same list on every rank. Collective (one
// all-reduce).
std::vector<std::string> host_names(Communicator& comm);
// Every rank's `mine` (its first `slot` bytes, no NUL inside), in rank order, on every rank.
// Collective (one all-reduce).
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine,
                                            std::size_t slot);

}  // namespace tessera
