// PartitionPlan: which rank owns each node, the simple partitioners (block, random) that METIS
// is compared with, and the statistics every partitioner reports: edge cut, halo nodes per part,
// replication factor, node and training-node imbalance.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/core/csr.h"

namespace tessera {

enum class PartitionMethod { Block, Random };
PartitionMethod parse_partition_method(const std::string& text);  // "block" | "random"
std::string to_string(PartitionMethod method);

struct PartitionPlan {
  int num_parts = 1;
  std::vector<std::int32_t> owner;  // (N) part of every node, in [0, num_parts)
};

// Contiguous id ranges of (almost) equal size: part p owns [p*N/k, (p+1)*N/k).
PartitionPlan partition_block(std::int64_t num_nodes, int num_parts);
// Each node to a part drawn from the counter RNG keyed by seed (balanced in expectation).
PartitionPlan partition_random(std::int64_t num_nodes, int num_parts, std::uint64_t seed);

struct PartitionStats {
  std::int64_t edge_cut = 0;               // directed CSR entries whose ends have different owners
  std::vector<std::int64_t> owned_nodes;   // (K)
  std::vector<std::int64_t> halo_nodes;    // (K) distinct in-neighbours owned elsewhere
  std::vector<std::int64_t> train_nodes;   // (K)
  double replication_factor = 1.0;         // (owned + halo summed over parts) / N
  double node_imbalance = 1.0;             // max owned / mean owned
  double train_imbalance = 1.0;            // max train / mean train (1 when there are none)
};

// Statistics of `plan` on `graph` (rows = destinations, columns = in-neighbours).
PartitionStats partition_stats(const Csr& graph, const PartitionPlan& plan,
                               std::span<const GlobalId> train_idx);

}  // namespace tessera
