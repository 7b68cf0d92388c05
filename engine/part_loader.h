// SPDX-License-Identifier: Apache-2.0
// Getting each rank its GraphPart, collectively: from a partition store (every rank opens only
// its own part file), or in process (rank 0 loads the dataset, partitions it and sends each
// rank its part as an in-memory part file; rank 0 then drops the whole graph), or — on one
// rank — the whole dataset as the only part. Every phase ends in an agreement, so a failure on
// any rank (a missing file, a bad flag) ends every rank with the same message.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "partition/graph_part.h"
#include "partition/node_order.h"
#include "partition/partition_plan.h"

namespace tessera {

struct PartSource {
  std::string dataset;             // load_dataset spec (in-process partitioning)
  // When set, called (on the rank that loads) instead of load_dataset(dataset): a dataset the
  // caller already holds in memory; `dataset` then only names it.
  std::function<Dataset()> make_dataset;
  bool dataset_given = false;      // --dataset was set explicitly (checked against a store)
  std::string partitions_dir;      // a partition store; empty: partition in process
  int parts = 0;                   // --parts: must equal the number of ranks; 0: not given
  int launcher_tasks = 0;          // SLURM_NTASKS (0: not under Slurm): --parts must equal it too
  PartitionMethod method = PartitionMethod::Metis;
  std::uint64_t seed = 0;          // partitioner seed
  // A plan file (partition/plan_file.h) whose parts replace the partitioner's: built from
  // slices of a Tessera HDF5 file (planned_part_from_slice), else cut by rank 0.
  std::string plan_file;
  // Renumbering for locality where one rank holds the whole graph (in process and alone); parts
  // read from a store or in slices keep the order they have.
  NodeOrder node_order = NodeOrder::None;
  bool progress = false;
};

struct LoadedPart {
  GraphPart part;
  std::string method = "none";  // metis | random | block | a plan file's | none (one rank alone)
  std::optional<PartitionStats> stats;   // on rank 0 (and on every rank with a store)
  double load_s = 0.0;                   // reading the dataset or the part
  std::string dataset_spec;              // a store's: the dataset it was made from
  bool sliced = false;  // each rank read only its rows of an .h5 (block parts, or a plan file's)
  // Rank 0 partitioned an .h5 without its features, each rank read its own feature rows.
  bool features_by_owner = false;
  NodeOrder node_order = NodeOrder::None;  // what the nodes were renumbered by
  double order_s = 0.0;                    // finding the order and renumbering (rank 0)
};

// Collective over `comm`. Throws AgreedError (the same on every rank) when any rank fails.
// The parts are checked against each other (check_part_set) before it returns.
LoadedPart load_part(const PartSource& source, Communicator& comm);

// The parts of a job against each other, collectively and cheaply (one broadcast of 8 bytes and
// one all-reduce of 9 numbers, no point-to-point traffic): one partitioning (rank 0's plan
// fingerprint on every rank); owned nodes covering the graph exactly once (their count, and a
// sum of hashed ids that overlaps or gaps change); and every halo block a rank expects from a
// peer equal, in count and in global ids, to what that peer sends it (sums over all blocks of
// both sides' hashes). `label` names this rank's part (its file).
// Collective; AgreedError (InvalidInput) on every rank when they disagree.
void check_part_set(Communicator& comm, const GraphPart& part, const std::string& label);

}  // namespace tessera
