// SPDX-License-Identifier: Apache-2.0
// Checkpoints: the global state of a training job (weights, Adam moments and step, batch-norm
// running statistics, run and epoch, the results and metrics records so far, the identity of the
// configuration and dataset, the pipeline's historical buffers) as one HDF5 file, written by rank 0
// to a temporary file, synced and renamed, with a 64-bit checksum over every payload byte that load
// verifies. Nothing in it is per rank, so a checkpoint taken on K ranks resumes on any K', in any
// parallel mode (the whole model's weights, gathered from the stages of a pipeline). Relies on
// datasets/hdf5_io.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "partition/graph_part.h"

namespace tessera {

// Format 2 adds the best epoch's weights (--restore-best), format 3 the runner's state (the
// pipeline's historical buffers), format 4 the seal after the HDF5 image (below); files of
// formats 1 to 3 still load.
inline constexpr std::int64_t kCheckpointFormat = 4;
// The seal: 24 bytes after the HDF5 image — "TSRSEAL1", then the image's length and its hash
// (core/hash.h), each a little-endian uint64. A checkpoint's bytes are checked against it
// before HDF5 parses any of them: HDF5 1.10 can crash on corrupt metadata (docs/robustness.md).
inline constexpr std::size_t kCheckpointSealBytes = 24;
// Runner arrays one checkpoint may hold (a pipeline keeps two per layer).
inline constexpr std::int64_t kMaxRunnerArrays = 4096;

// The settings that decide a run's trajectory, as (flag, value) pairs: a checkpoint resumes
// only under the same ones (threads, checkpointing, output files and the number of ranks may
// differ). The dataset enters by name and fingerprint.
using CheckpointIdentity = std::vector<std::pair<std::string, std::string>>;
CheckpointIdentity checkpoint_identity(const TrainConfig& config, const DatasetInfo& dataset);

struct CheckpointState {
  CheckpointIdentity identity;
  int ranks = 1;                         // ranks that wrote it (informational: resume on any)
  std::uint64_t partition_fingerprint = 0;  // of the owner of every node (informational)
  int run = 0;                           // the run in progress
  int epoch = 0;                         // epochs of `run` completed (== epochs: run finished)
  std::vector<RunResult> finished;       // runs before `run`
  RunResult current;                     // `run` so far: best-valid tracking, per-epoch series
  std::array<double, static_cast<int>(TrafficCategory::Count)> bytes_total{}, raw_total{};
  std::vector<EpochRecord> history;      // every epoch record so far, all runs (metrics file)
  std::vector<float> params;             // model parameters, one flat buffer
  std::vector<float> adam_m, adam_v;     // Adam moments (same length)
  std::int64_t adam_steps = 0;
  std::vector<float> buffers;            // batch-norm running statistics (may be empty)
  // --restore-best: the weights after the run's best validation epoch so far (else empty).
  std::vector<float> best_params, best_buffers;
  // The mode runner's state in node-id order (engine/mode_runner.h; empty in graph mode).
  std::vector<NodeArray> runner_state;
};

// The file image of a checkpoint (HDF5, then the seal), and back. from_image verifies the seal
// (a file of format 4 or later must have one), format and checksum and throws InvalidInput
// naming `label` when the file is truncated, corrupt or not a checkpoint.
std::vector<std::byte> checkpoint_image(const CheckpointState& state);
CheckpointState checkpoint_from_image(std::span<const std::byte> image, const std::string& label);

// "" when a checkpoint may resume under `identity`, else the differences, "--flag: checkpoint
// A, this run B" joined by "; ".
std::string identity_difference(const CheckpointIdentity& saved, const CheckpointIdentity& now);

// "checkpoint-r0000-e000040.h5": run 0 after 40 epochs.
std::string checkpoint_file_name(int run, int epoch);

struct CheckpointFile {
  std::filesystem::path path;
  int run = 0;
  int epoch = 0;
};
// Checkpoint files in `dir`, newest (run, epoch) first; temporary and set-aside files ignored.
std::vector<CheckpointFile> list_checkpoints(const std::filesystem::path& dir);

// Writes the state as dir/checkpoint_file_name(run, epoch): image to a temporary file in dir,
// fsync, rename, fsync of dir. With crash_before_rename the process kills itself (SIGKILL)
// between the write and the rename (fault injection for tests). Throws Io naming the file.
std::filesystem::path write_checkpoint(const std::filesystem::path& dir,
                                       const CheckpointState& state, bool crash_before_rename);
// Keeps the newest `keep` checkpoints of dir and removes older ones and stale temporary files.
void prune_checkpoints(const std::filesystem::path& dir, int keep);
// Creates dir if needed and checks that a file can be created in it (Io naming it otherwise).
void check_checkpoint_dir(const std::filesystem::path& dir);

// Fingerprint of the partitioning (which rank owns which node): FNV-1a of each rank's owned ids,
// gathered with one all-reduce and combined in rank order. Collective.
std::uint64_t partition_fingerprint(Communicator& comm, std::span<const GlobalId> owned_ids);
// Rank 0 picks the newest valid checkpoint of config.checkpoint_dir (setting corrupt ones aside
// as NAME.corrupt, with a warning) and checks that it belongs to `identity`; returns its image
// and path, or nothing (InvalidArgument with --resume). Throws on rank 0 only: call inside
// run_agreed.
std::vector<std::byte> find_checkpoint(const TrainConfig& config,
                                       const CheckpointIdentity& identity, std::string& path_out);

// Whole file as bytes; Io naming it when it cannot be read.
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path);

}  // namespace tessera
