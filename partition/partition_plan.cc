// Block and random partitioners and the statistics of a plan.
#include "partition/partition_plan.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/core/rng.h"

namespace tessera {
namespace {

void check_parts(std::int64_t num_nodes, int num_parts) {
  TESSERA_CHECK(num_parts >= 1, InvalidArgument, "number of parts must be >= 1, got ", num_parts);
  TESSERA_CHECK(num_nodes >= 0, InvalidArgument, "negative node count ", num_nodes);
}

double imbalance(const std::vector<std::int64_t>& counts) {
  std::int64_t total = 0, largest = 0;
  for (std::int64_t c : counts) {
    total += c;
    largest = std::max(largest, c);
  }
  if (total == 0) return 1.0;
  return static_cast<double>(largest) * static_cast<double>(counts.size()) /
         static_cast<double>(total);
}

}  // namespace

PartitionMethod parse_partition_method(const std::string& text) {
  if (text == "block") return PartitionMethod::Block;
  if (text == "random") return PartitionMethod::Random;
  TESSERA_FAIL(InvalidArgument, "unknown partition method '", text, "' (expected block or random)");
}

std::string to_string(PartitionMethod method) {
  return method == PartitionMethod::Block ? "block" : "random";
}

PartitionPlan partition_block(std::int64_t num_nodes, int num_parts) {
  check_parts(num_nodes, num_parts);
  PartitionPlan plan{num_parts, std::vector<std::int32_t>(static_cast<std::size_t>(num_nodes))};
  for (int p = 0; p < num_parts; ++p) {
    std::int64_t begin = num_nodes * p / num_parts, end = num_nodes * (p + 1) / num_parts;
    std::fill(plan.owner.begin() + begin, plan.owner.begin() + end, p);
  }
  return plan;
}

PartitionPlan partition_random(std::int64_t num_nodes, int num_parts, std::uint64_t seed) {
  check_parts(num_nodes, num_parts);
  CounterRng rng(seed, 0, 0, RngPurpose::Init);
  PartitionPlan plan{num_parts, std::vector<std::int32_t>(static_cast<std::size_t>(num_nodes))};
  for (std::int64_t v = 0; v < num_nodes; ++v) {
    std::uint64_t word = rng.words(static_cast<std::uint64_t>(v), 0)[0];
    plan.owner[v] = static_cast<std::int32_t>((word * static_cast<std::uint64_t>(num_parts)) >> 32);
  }
  return plan;
}

PartitionStats partition_stats(const Csr& graph, const PartitionPlan& plan,
                               std::span<const GlobalId> train_idx) {
  const std::int64_t n = graph.num_rows();
  const int k = plan.num_parts;
  TESSERA_CHECK(static_cast<std::int64_t>(plan.owner.size()) == n, InvalidArgument,
                "partition plan covers ", plan.owner.size(), " nodes, graph has ", n);
  PartitionStats stats;
  stats.owned_nodes.assign(k, 0);
  stats.halo_nodes.assign(k, 0);
  stats.train_nodes.assign(k, 0);
  // last_seen[u] = the last part that counted u as a halo node; rows are visited part by part.
  std::vector<std::vector<std::int64_t>> rows_of(k);
  for (std::int64_t v = 0; v < n; ++v) rows_of[plan.owner[v]].push_back(v);
  std::vector<std::int32_t> last_seen(static_cast<std::size_t>(n), -1);
  const auto& indptr = graph.indptr();
  const auto& indices = graph.indices();
  for (int p = 0; p < k; ++p) {
    stats.owned_nodes[p] = static_cast<std::int64_t>(rows_of[p].size());
    for (std::int64_t v : rows_of[p]) {
      for (EdgeOffset e = indptr[v]; e < indptr[v + 1]; ++e) {
        NodeId u = indices[e];
        if (plan.owner[u] == p) continue;
        ++stats.edge_cut;
        if (last_seen[u] != p) {
          last_seen[u] = p;
          ++stats.halo_nodes[p];
        }
      }
    }
  }
  for (GlobalId v : train_idx) {
    TESSERA_CHECK(v >= 0 && v < n, InvalidArgument, "training node ", v, " out of range");
    ++stats.train_nodes[plan.owner[v]];
  }
  std::int64_t replicated = n;
  for (std::int64_t h : stats.halo_nodes) replicated += h;
  stats.replication_factor = n ? static_cast<double>(replicated) / static_cast<double>(n) : 1.0;
  stats.node_imbalance = imbalance(stats.owned_nodes);
  stats.train_imbalance = imbalance(stats.train_nodes);
  return stats;
}

}  // namespace tessera
