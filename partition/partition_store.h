// SPDX-License-Identifier: Apache-2.0
// The partition store: a directory with meta.json (dataset identity and fingerprint, K, method,
// statistics) and one HDF5 file per part (part-00000.h5, ...) holding that part's GraphPart, so
// that rank r opens only its own file and its memory follows its part, not the graph. The same
// HDF5 layout, as an in-memory image, is how rank 0 ships parts when it partitions in process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "partition/graph_part.h"
#include "partition/node_order.h"
#include "partition/partition_plan.h"

namespace tessera {

struct StoreMeta {
  std::string dataset_spec;  // what the store was made from, as given to load_dataset
  DatasetInfo dataset;
  int num_parts = 1;
  PartitionMethod method = PartitionMethod::Metis;
  std::uint64_t seed = 0;
  NodeOrder node_order = NodeOrder::None;  // what the nodes were renumbered by before the cut
  PartitionStats stats;
  std::uint64_t plan_fingerprint = 0;  // of the partitioning (set by write_partition_store)
};

std::string part_file_name(int part);  // "part-00003.h5"

// Writes the store into a temporary directory beside `dir` and renames it to `dir` at the end,
// so an interrupted run leaves no partial store. Refuses (InvalidArgument) an existing `dir`
// that is not empty. Parts are built one at a time; `complete`, when given, finishes each one
// before it is checked and written (partition_graph reads its feature rows from the file there).
void write_partition_store(const std::filesystem::path& dir, const PartBuilder& builder,
                           const StoreMeta& meta, bool progress,
                           const std::function<void(GraphPart&)>& complete = {});

// meta.json of a store; InvalidInput naming the file when it is missing keys or malformed.
StoreMeta read_store_meta(const std::filesystem::path& dir);
// Part `part` of the store, checked against meta (part index, K, dataset and plan fingerprints:
// a part file of another store is refused by name) and validated; a missing or corrupt file is an
// Io / InvalidInput error naming it.
GraphPart read_part(const std::filesystem::path& dir, const StoreMeta& meta, int part);

// A part as an in-memory HDF5 image (the part-file layout) and back (checked and validated).
std::vector<std::byte> part_image(const GraphPart& part);
GraphPart part_from_image(std::span<const std::byte> image, const std::string& label);

}  // namespace tessera
