// SPDX-License-Identifier: Apache-2.0
// PartitionPlan: which rank owns each node; the simple partitioners (block, random) that METIS
// is compared with; make_partition, the one place that dispatches on PartitionMethod (METIS
// itself lives in metis_partition.h); and the statistics every partitioner reports: edge cut,
// halo nodes per part, replication factor, node and training-node imbalance.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/csr.h"

namespace tessera {

enum class PartitionMethod { Block, Random, Metis };
// "metis" | "random" | "block"; anything else throws InvalidArgument listing them.
PartitionMethod parse_partition_method(const std::string& text);
std::vector<std::string> partition_method_names();  // metis, random, block
std::string to_string(PartitionMethod method);  // the same names

struct PartitionPlan {
  int num_parts = 1;
  std::vector<std::int32_t> owner;  // (N) part of every node, in [0, num_parts)
};

// A fingerprint of the plan (K and every node's part): which partitioning a part came from, so
// that parts of different partitionings of one dataset are never trained together.
std::uint64_t plan_fingerprint(const PartitionPlan& plan);

// Throws InvalidArgument unless 1 <= num_parts <= num_nodes (every partitioner checks this).
void check_num_parts(std::int64_t num_nodes, int num_parts);

// Contiguous id ranges of (almost) equal size: part p owns [p*N/K, (p+1)*N/K).
PartitionPlan partition_block(std::int64_t num_nodes, int num_parts);
// The same ranges without the (N) owners, for ranks that read their block of a file:
// block_first(N, K, p) = p*N/K is the first node of part p (N for p = K), and block_part_of
// the part that owns `node`, in O(1). Both take 1 <= K <= N (not checked here) and work in 64
// bits for any N below 2^62 / K.
std::int64_t block_first(std::int64_t num_nodes, int num_parts, int part);
int block_part_of(std::int64_t num_nodes, int num_parts, std::int64_t node);
// Each node to a part drawn from the counter RNG keyed by seed (balanced in expectation; a part
// may come out empty when N is close to K).
PartitionPlan partition_random(std::int64_t num_nodes, int num_parts, std::uint64_t seed);

// Runs the partitioner `method` on `graph` (square; rows = destinations). Block and random look
// only at the node count; METIS also uses the edges and train_idx (see partition_metis).
PartitionPlan make_partition(PartitionMethod method, const Csr& graph,
                             std::span<const GlobalId> train_idx, int num_parts,
                             std::uint64_t seed);

// The nodes grouped by part (a counting sort): part p's nodes are
// nodes[begin[p] .. begin[p + 1]), by increasing id. Every owner must be in [0, num_parts)
// (not checked here).
struct NodesByPart {
  std::vector<GlobalId> nodes;      // (N)
  std::vector<std::int64_t> begin;  // (K + 1)
};
NodesByPart group_nodes_by_part(std::span<const std::int32_t> owner, int num_parts);

struct PartitionStats {
  std::int64_t edge_cut = 0;               // directed CSR entries whose ends have different owners
  std::vector<std::int64_t> owned_nodes;   // (K)
  std::vector<std::int64_t> halo_nodes;    // (K) distinct in-neighbours owned elsewhere
  std::int64_t halo_nodes_total = 0;       // sum of halo_nodes
  std::vector<std::int64_t> train_nodes;   // (K)
  double replication_factor = 1.0;         // (owned + halo summed over parts) / N
  double node_imbalance = 1.0;             // max owned / mean owned
  double train_imbalance = 1.0;            // max train / mean train (1 when there are none)
  double seconds = 0;                      // time the partitioner took: set by the caller who
                                           // timed it; partition_stats leaves it 0
};

// Statistics of `plan` on `graph` (rows = destinations, columns = in-neighbours). O(E), parallel
// over rows; plan.owner must have N entries in [0, K) (InvalidArgument otherwise). Training
// nodes are counted once per entry of train_idx.
PartitionStats partition_stats(const Csr& graph, const PartitionPlan& plan,
                               std::span<const GlobalId> train_idx);

}  // namespace tessera
