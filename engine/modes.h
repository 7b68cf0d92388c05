// SPDX-License-Identifier: Apache-2.0
// The parallel modes, one table of them: name, help, the rules of each mode beyond the option
// table, and the runner that trains one rank's share (engine/mode_runner.h). Each mode is a
// file: engine/graph_mode.cc, engine/pipeline_mode.cc, engine/hybrid_mode.cc.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "engine/mode_runner.h"
#include "engine/train_config.h"
#include "partition/graph_part.h"

namespace tessera {

struct ModeSpec {
  ParallelMode mode;
  std::string_view name;  // what --parallel takes
  std::string_view help;
  void (*validate)(const TrainConfig& config);  // InvalidArgument naming the flags
  // This rank's runner over `part` (kept by reference, as are config and comm). Local only.
  std::unique_ptr<ModeRunner> (*make)(const TrainConfig& config, GraphPart& part,
                                      Communicator& comm);
};

// The table (engine/modes.cc), in ParallelMode order.
// Where a rank trains: --device, and for the GPU ranks of a multi-rank job the communicator of
// their device memory (NCCL, or with --gpu-comm mpi staged through host memory over MPI, so
// that ranks may share a GPU), bootstrapped over `job` with each rank's GPU bound by the launch
// rules (comm/gpu_binding.h); collective and agreed. `comm` is null on the CPU and for one rank;
// its traffic is counted in job's counter. ranks_on_gpu: how many of the job's ranks run on this
// rank's GPU, itself included (several under --gpu-comm mpi, which share its memory too).
struct DevicePlacement {
  Device device;
  std::unique_ptr<Communicator> comm;
  int ranks_on_gpu = 1;
};
DevicePlacement place_on_device(const TrainConfig& config, Communicator& job);
// An evaluation's logits where the metrics read them: `logits` itself on the CPU, else copied
// into `host` (a GPU run's, copied down).
const Tensor* logits_on_host(const Tensor& logits, Tensor& host);

std::span<const ModeSpec> parallel_modes();
const ModeSpec& mode_spec(ParallelMode mode);
std::vector<std::string> parallel_mode_names();

}  // namespace tessera
