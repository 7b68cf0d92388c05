// SPDX-License-Identifier: Apache-2.0
// Each rank's part of a Tessera HDF5 dataset built from the rows it reads of the file, without
// any rank reading or holding the whole graph or the whole feature matrix: the block partition
// (part p owns [p N / K, (p + 1) N / K), partition_block), collectively over `comm`. A rank
// reads its rows (read_hdf5_rows), sends the owners of its columns the reverse entries (the
// training graph is symmetric), learns which of its rows each peer needs, and exchanges the
// degrees of its halo nodes. The part equals PartBuilder's part of the same plan on the whole
// dataset, field for field (test_sliced_part).
#pragma once

#include <filesystem>
#include <string>

#include "comm/communicator.h"
#include "datasets/loaders.h"
#include "partition/graph_part.h"

namespace tessera {

GraphPart sliced_block_part(const std::filesystem::path& file, Communicator& comm);

// The same in steps, so that a caller can agree on local failures between the collective ones:
// reading rank `rank`'s rows (local); checking that every rank read the same node count and
// fingerprint (one all-reduce; InvalidInput on every rank otherwise); the exchanges that build
// the part (no local failure on consistent slices); then validate(part) (local).
DatasetSlice read_block_slice(const std::filesystem::path& file, int rank, int ranks);
void check_same_dataset(const DatasetSlice& slice, const std::string& file, Communicator& comm);
GraphPart block_part_from_slice(DatasetSlice slice, Communicator& comm);
// The same for any plan (a plan file's, from a partitioner run across the ranks): the slices are
// still read in blocks, and each node's row of the training graph, features, labels or targets
// and split membership go to the rank that owns it. Equals PartBuilder's part of `plan`.
GraphPart planned_part_from_slice(DatasetSlice slice, const PartitionPlan& plan,
                                  Communicator& comm);

// The partitioning's statistics (partition_stats of the whole training graph under the parts'
// plan) gathered from the parts: owned, halo and training nodes per part, the edge cut.
PartitionStats gathered_stats(const GraphPart& part, Communicator& comm);

}  // namespace tessera
