// SPDX-License-Identifier: Apache-2.0
// The plan file: one partitioning of a dataset (every node's part) in an HDF5 file, what a
// partitioner that runs outside Tessera's ranks writes (partition_distributed, PT-Scotch across
// ranks) and what `train_gcn --partition-file` reads. It names the dataset it was cut from by
// node count and fingerprint, so a plan of another dataset is refused.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "partition/partition_plan.h"

namespace tessera {

struct PlanFile {
  PartitionPlan plan;
  std::string method;                     // the partitioner, e.g. "ptscotch"
  std::string dataset;                    // the dataset's name
  std::uint64_t dataset_fingerprint = 0;  // fingerprint(dataset) of what was partitioned
  std::int64_t edge_cut = -1;             // as the partitioner counted it; -1: not recorded
};

// Writes `file` (format "tessera-plan", version 1; /owner int32 (N) with checksums, attributes
// for the rest) into a temporary file beside `path` that is renamed at the end, so an
// interrupted writer leaves nothing at `path`. Refuses an existing `path` (InvalidArgument).
void write_plan_file(const std::filesystem::path& path, const PlanFile& file);

// Reads and checks a plan file: format, K >= 1, every owner in [0, K). Io / InvalidInput naming
// the file otherwise.
PlanFile read_plan_file(const std::filesystem::path& path);

// InvalidInput unless `file` was cut from a dataset of `num_nodes` nodes and this fingerprint
// into `parts` parts; `what` names the plan in the message (the flag and its value).
void check_plan_matches(const PlanFile& file, const std::string& what, std::int64_t num_nodes,
                        std::uint64_t fingerprint, int parts);

}  // namespace tessera
