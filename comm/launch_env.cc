// SPDX-License-Identifier: Apache-2.0
// Launch environment detection: parse Slurm's variables on every rank (agreed), gather every
// rank's SLURM_PROCID with one all-reduce, and decide from the whole picture, identically on
// every rank, whether the ranks are one srun step and whether Slurm and MPI agree.
#include "comm/launch_env.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "comm/agreement.h"
#include "core/error.h"

namespace tessera {
namespace {

// The variable as a non-negative integer; -1 when unset. InvalidArgument when malformed.
int integer_variable(const EnvLookup& env, const char* name) {
  const char* text = env(name);
  if (text == nullptr || *text == '\0') return -1;
  const std::string_view view(text);
  int value = -1;
  const auto [end, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
  TESSERA_CHECK(ec == std::errc() && end == view.data() + view.size() && value >= 0,
                InvalidArgument, name, "='", text, "' is not a non-negative integer");
  return value;
}

// What is wrong with the launch, from every rank's SLURM_PROCID + 1 (0: unset) and SLURM_STEP_
// NUM_TASKS + 1 (`seen`, 2K values), or "": tasks of an srun step that did not join one MPI job,
// or Slurm and MPI disagreeing on the rank order. `srun` says whether the ranks are the tasks
// of one srun step (every PROCID 0..K-1 once).
std::string launch_problem(const std::vector<std::int64_t>& seen, int k, bool& srun) {
  std::string problem;
  std::set<std::int64_t> distinct;
  bool any = false;
  for (int r = 0; r < k && problem.empty(); ++r) {
    const std::int64_t p = seen[static_cast<std::size_t>(r)] - 1;
    if (p < 0) continue;
    any = true;
    distinct.insert(p);
    if (p >= k) {
      problem = detail::concat(
          "MPI rank ", r, " of ", k, " has SLURM_PROCID=", p,
          ": the tasks of this srun step did not join one MPI job (launch with srun --mpi=pmi2, "
          "or with mpiexec inside the allocation)");
    }
  }
  // srun: every rank a task of the step, PROCIDs 0..K-1 each once. Under mpiexec the ranks of a
  // node share their proxy's PROCID, so they repeat (or all are 0 on one node).
  srun = false;
  if (!problem.empty() || !any) return problem;
  const std::int64_t tasks = seen[static_cast<std::size_t>(k)] - 1;
  srun = static_cast<int>(distinct.size()) == k && (k > 1 || tasks > 1);
  if (!srun) return problem;
  for (int r = 0; r < k && problem.empty(); ++r) {
    const std::int64_t p = seen[static_cast<std::size_t>(r)] - 1;
    if (p != r) {
      problem = detail::concat("MPI rank ", r, " has SLURM_PROCID=", p,
                               ": Slurm and MPI disagree on the rank order");
    }
  }
  if (problem.empty() && tasks > 0 && tasks != k) {
    problem = detail::concat("this srun step has SLURM_STEP_NUM_TASKS=", tasks,
                             " tasks but MPI sees ", k, k == 1 ? " rank" : " ranks",
                             ": the tasks did not join one MPI job (use srun --mpi=pmi2)");
  }
  return problem;
}

}  // namespace

LaunchEnv detect_launch_env(Communicator& comm, int local_rank, int local_size,
                            const EnvLookup& lookup) {
  const EnvLookup env = lookup ? lookup : EnvLookup([](const char* name) { return std::getenv(name); });
  LaunchEnv out;
  out.rank = comm.rank();
  out.size = comm.size();
  out.local_rank = local_rank;
  out.local_size = local_size;
  int procid = -1, step_tasks = -1, localid = -1;
  run_agreed(comm, "reading the Slurm environment", [&] {
    const char* job = env("SLURM_JOB_ID");
    out.slurm = job != nullptr && *job != '\0';
    if (out.slurm) out.job_id = job;
    procid = integer_variable(env, "SLURM_PROCID");
    step_tasks = integer_variable(env, "SLURM_STEP_NUM_TASKS");
    localid = integer_variable(env, "SLURM_LOCALID");
    out.slurm_tasks = std::max(0, integer_variable(env, "SLURM_NTASKS"));
    const int cpus = integer_variable(env, "SLURM_CPUS_PER_TASK");
    TESSERA_CHECK(cpus != 0, InvalidArgument, "SLURM_CPUS_PER_TASK=0: expected at least 1");
    out.cpus_per_task = std::max(0, cpus);
    out.restart_count = std::max(0, integer_variable(env, "SLURM_RESTART_COUNT"));
    const char* array_job = env("SLURM_ARRAY_JOB_ID");
    const char* array_task = env("SLURM_ARRAY_TASK_ID");
    if (array_job != nullptr && array_task != nullptr)
      out.array_task = std::string(array_job) + "_" + array_task;
  });

  // Every rank's SLURM_PROCID + 1 (0: unset) and SLURM_STEP_NUM_TASKS + 1.
  const int k = comm.size();
  std::vector<std::int64_t> seen(2 * static_cast<std::size_t>(k), 0);
  seen[static_cast<std::size_t>(comm.rank())] = procid + 1;
  seen[static_cast<std::size_t>(k + comm.rank())] = step_tasks + 1;
  comm.all_reduce_max(seen);

  // The same decision on every rank, from the gathered values only.
  bool srun = false;
  const std::string problem = launch_problem(seen, k, srun);
  run_agreed(comm, "checking the launch environment", [&] {
    if (!problem.empty()) {
      if (comm.rank() == 0) TESSERA_FAIL(InvalidArgument, problem);
      return;
    }
    if (srun && localid >= 0) {
      TESSERA_CHECK(localid < local_size, InvalidArgument, "SLURM_LOCALID=", localid, " on rank ",
                    comm.rank(), " but MPI sees ", local_size, " ranks on its node");
      out.local_rank = localid;
    }
  });
  out.srun = srun;
  return out;
}

std::string describe(const LaunchEnv& env) {
  std::string text = detail::concat("rank ", env.rank, " of ", env.size, " (local ", env.local_rank,
                                    " of ", env.local_size, ")");
  if (env.slurm) {
    text += detail::concat(", Slurm job ", env.job_id, " (", env.srun ? "srun" : "mpiexec",
                           env.restart_count > 0 ? detail::concat(", restart ", env.restart_count)
                                                 : std::string(),
                           ")");
  }
  return text;
}

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine,
                                            std::size_t slot) {
  slot = (slot + sizeof(std::int64_t) - 1) / sizeof(std::int64_t) * sizeof(std::int64_t);
  const auto k = static_cast<std::size_t>(comm.size());
  std::vector<std::int64_t> slots(k * slot / sizeof(std::int64_t), 0);
  std::memcpy(reinterpret_cast<char*>(slots.data()) + static_cast<std::size_t>(comm.rank()) * slot,
              mine.data(), std::min(mine.size(), slot));
  comm.all_reduce_max(slots);  // every other rank's slot is zero
  std::vector<std::string> all;
  for (std::size_t r = 0; r < k; ++r) {
    const char* at = reinterpret_cast<const char*>(slots.data()) + r * slot;
    all.emplace_back(at, strnlen(at, slot));
  }
  return all;
}

std::vector<std::string> host_names(Communicator& comm) {
  constexpr std::size_t kSlot = 64;  // bytes of a host name (longer ones are cut)
  char name[kSlot + 1] = {};
  if (::gethostname(name, kSlot) != 0) std::snprintf(name, sizeof name, "unknown");
  return all_gather_strings(comm, name, kSlot);
}

}  // namespace tessera
