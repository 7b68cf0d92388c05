// SPDX-License-Identifier: Apache-2.0
// The table of parallel modes. Adding a mode: its ParallelMode value (engine/train_config.h), a
// file with its runner and `extern const ModeSpec kYourParallel`, and X(kYourParallel) below;
// --parallel, the Python module and the summaries pick it up from here.
#include "engine/modes.h"

#include "comm/agreement.h"
#include "comm/gpu_communicator.h"
#include "core/error.h"

#define TESSERA_PARALLEL_MODES(X) X(kGraphParallel) X(kPipelineParallel) X(kHybridParallel)

namespace tessera {

#define TESSERA_DECLARE_MODE(mode) extern const ModeSpec mode;
TESSERA_PARALLEL_MODES(TESSERA_DECLARE_MODE)
#undef TESSERA_DECLARE_MODE

namespace {

#define TESSERA_MODE_ENTRY(mode) &mode,
const ModeSpec* const kModes[] = {TESSERA_PARALLEL_MODES(TESSERA_MODE_ENTRY)};
#undef TESSERA_MODE_ENTRY

}  // namespace

std::span<const ModeSpec> parallel_modes() {
  static const std::vector<ModeSpec> modes = [] {
    std::vector<ModeSpec> all;
    for (const ModeSpec* mode : kModes) {
      TESSERA_CHECK(static_cast<std::size_t>(mode->mode) == all.size(), Internal,
                    "the parallel modes must be listed in ParallelMode order");
      all.push_back(*mode);
    }
    return all;
  }();
  return modes;
}

DevicePlacement place_on_device(const TrainConfig& config, Communicator& job) {
  DevicePlacement placement{parse_device(config.device), nullptr};
  if (placement.device.kind == DeviceKind::Cpu || job.size() == 1) return placement;
  int index = 0;
  run_agreed(job, "binding the GPUs", [&] {
    placement.comm =
        make_gpu_communicator(job, config.device, config.gpu_comm, &index, &placement.ranks_on_gpu);
  });
  placement.device.index = index;  // each rank's own GPU
  return placement;
}

const Tensor* logits_on_host(const Tensor& logits, Tensor& host) {
  if (logits.device().kind == DeviceKind::Cpu) return &logits;
  host.resize(logits.rows(), logits.cols(), Device::cpu());
  host.copy_from(logits);
  return &host;
}

const ModeSpec& mode_spec(ParallelMode mode) {
  return parallel_modes()[static_cast<std::size_t>(mode)];
}

std::vector<std::string> parallel_mode_names() {
  std::vector<std::string> names;
  for (const ModeSpec& mode : parallel_modes()) names.emplace_back(mode.name);
  return names;
}

ParallelMode parse_parallel_mode(const std::string& text) {
  for (const ModeSpec& mode : parallel_modes())
    if (mode.name == text) return mode.mode;
  TESSERA_FAIL(InvalidArgument, "--parallel: expected one of ",
               detail::join_names(parallel_mode_names()), ", got '", text, "'");
}

std::string to_string(ParallelMode mode) { return std::string(mode_spec(mode).name); }

}  // namespace tessera
