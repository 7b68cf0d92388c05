// SPDX-License-Identifier: Apache-2.0
// Block and random partitioners, the method dispatcher and the statistics of a plan. Halo nodes
// are counted in O(E) with OpenMP: one bit per (node, part) set atomically while K <= 512,
// otherwise parts are scanned in parallel, each thread stamping the nodes it has counted.
#include "partition/partition_plan.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <utility>

#include "core/error.h"
#include "core/hash.h"
#include "core/rng.h"
#include "partition/metis_partition.h"

namespace tessera {
namespace {

constexpr int kMaxBitmaskWords = 8;  // (N, W) halo bitmask up to 64 bytes per node: K <= 512

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

struct CutCounts {
  std::int64_t edge_cut = 0;
  std::vector<std::int64_t> halo_nodes;  // (K)
};

// Bit p of reads[u * W + p / 64] is set when a row owned by part p lists u, u owned elsewhere.
CutCounts count_cut_bitmask(const Csr& graph, std::span<const std::int32_t> owner, int k) {
  const std::int64_t n = graph.num_rows();
  const std::int64_t words = (k + 63) / 64;
  const EdgeOffset* indptr = graph.indptr().data();
  const NodeId* indices = graph.indices().data();
  std::vector<std::uint64_t> reads(static_cast<std::size_t>(n * words), 0);  // (N, W)
  CutCounts out;
  std::int64_t cut = 0;
#pragma omp parallel for schedule(dynamic, 1024) reduction(+ : cut)
  for (std::int64_t v = 0; v < n; ++v) {
    const std::int32_t p = owner[v];
    const std::uint64_t bit = std::uint64_t{1} << (p & 63);
    for (EdgeOffset e = indptr[v]; e < indptr[v + 1]; ++e) {
      const NodeId u = indices[e];
      if (owner[u] == p) continue;
      ++cut;
      std::atomic_ref<std::uint64_t> word(reads[static_cast<std::size_t>(u * words + (p >> 6))]);
      if (!(word.load(std::memory_order_relaxed) & bit)) {
        word.fetch_or(bit, std::memory_order_relaxed);
      }
    }
  }
  out.edge_cut = cut;
  out.halo_nodes.assign(k, 0);
#pragma omp parallel
  {
    std::vector<std::int64_t> local(k, 0);  // (K) this thread's halo counts
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n * words; ++i) {
      const int base = static_cast<int>(i % words) * 64;
      for (std::uint64_t bits = reads[i]; bits; bits &= bits - 1) {
        ++local[base + std::countr_zero(bits)];
      }
    }
#pragma omp critical
    for (int p = 0; p < k; ++p) out.halo_nodes[p] += local[p];
  }
  return out;
}

}  // namespace

NodesByPart group_nodes_by_part(std::span<const std::int32_t> owner, int num_parts) {
  NodesByPart out;
  out.begin.assign(static_cast<std::size_t>(num_parts) + 1, 0);
  for (const std::int32_t p : owner) ++out.begin[static_cast<std::size_t>(p) + 1];
  for (int p = 0; p < num_parts; ++p) out.begin[p + 1] += out.begin[p];
  out.nodes.resize(owner.size());
  std::vector<std::int64_t> next(out.begin.begin(), out.begin.end() - 1);
  for (std::size_t v = 0; v < owner.size(); ++v) {
    out.nodes[static_cast<std::size_t>(next[owner[v]]++)] = static_cast<GlobalId>(v);
  }
  return out;
}

namespace {

// Parts in parallel; each thread keeps last_seen[u] = the last part of its own that counted u.
CutCounts count_cut_by_part(const Csr& graph, std::span<const std::int32_t> owner, int k) {
  const std::int64_t n = graph.num_rows();
  const EdgeOffset* indptr = graph.indptr().data();
  const NodeId* indices = graph.indices().data();
  // Rows grouped by owner: rows of part p are rows[part_begin[p] .. [p + 1]).
  const NodesByPart grouped = group_nodes_by_part(owner, k);
  const std::vector<GlobalId>& rows = grouped.nodes;
  const std::vector<std::int64_t>& part_begin = grouped.begin;
  CutCounts out;
  out.halo_nodes.assign(k, 0);
  std::int64_t cut = 0;
#pragma omp parallel reduction(+ : cut)
  {
    std::vector<std::int32_t> last_seen(static_cast<std::size_t>(n), -1);  // (N)
#pragma omp for schedule(dynamic, 1)
    for (int p = 0; p < k; ++p) {
      std::int64_t halo = 0;
      for (std::int64_t i = part_begin[p]; i < part_begin[p + 1]; ++i) {
        const GlobalId v = rows[i];
        for (EdgeOffset e = indptr[v]; e < indptr[v + 1]; ++e) {
          const NodeId u = indices[e];
          if (owner[u] == p) continue;
          ++cut;
          if (last_seen[u] != p) {
            last_seen[u] = p;
            ++halo;
          }
        }
      }
      out.halo_nodes[p] = halo;
    }
  }
  out.edge_cut = cut;
  return out;
}

}  // namespace

namespace {

constexpr std::pair<PartitionMethod, const char*> kMethods[] = {{PartitionMethod::Metis, "metis"},
                                                                {PartitionMethod::Random, "random"},
                                                                {PartitionMethod::Block, "block"}};

}  // namespace

PartitionMethod parse_partition_method(const std::string& text) {
  for (const auto& [method, name] : kMethods)
    if (text == name) return method;
  std::string expected;  // "a, b or c"
  for (std::size_t i = 0; i < std::size(kMethods); ++i)
    expected += (i == 0                         ? ""
                 : i + 1 == std::size(kMethods) ? " or "
                                                : ", ") +
                std::string(kMethods[i].second);
  TESSERA_FAIL(InvalidArgument, "unknown partition method '", text, "' (expected ", expected, ")");
}

std::vector<std::string> partition_method_names() {
  std::vector<std::string> names;
  for (const auto& [method, name] : kMethods) names.emplace_back(name);
  return names;
}

std::string to_string(PartitionMethod method) {
  for (const auto& [known, name] : kMethods)
    if (known == method) return name;
  TESSERA_FAIL(InvalidArgument, "unknown PartitionMethod ", static_cast<int>(method));
}

std::uint64_t plan_fingerprint(const PartitionPlan& plan) {
  Hasher hasher;
  hasher.add_word(static_cast<std::uint64_t>(plan.num_parts));
  hasher.add_section(1, std::span<const std::int32_t>(plan.owner));
  return hasher.finish();
}

void check_num_parts(std::int64_t num_nodes, int num_parts) {
  TESSERA_CHECK(num_parts >= 1, InvalidArgument, "number of parts must be >= 1, got ", num_parts);
  TESSERA_CHECK(num_parts <= num_nodes, InvalidArgument, "more parts (", num_parts,
                ") than nodes (", num_nodes, ")");
}

std::int64_t block_first(std::int64_t num_nodes, int num_parts, int part) {
  return num_nodes * part / num_parts;
}

int block_part_of(std::int64_t num_nodes, int num_parts, std::int64_t node) {
  // node * K / N lands on the part or next to it; the two loops settle which.
  int q = static_cast<int>(node * num_parts / num_nodes);
  while (q + 1 < num_parts && block_first(num_nodes, num_parts, q + 1) <= node) ++q;
  while (block_first(num_nodes, num_parts, q) > node) --q;
  return q;
}

PartitionPlan partition_block(std::int64_t num_nodes, int num_parts) {
  check_num_parts(num_nodes, num_parts);
  PartitionPlan plan{num_parts, std::vector<std::int32_t>(static_cast<std::size_t>(num_nodes))};
  for (int p = 0; p < num_parts; ++p) {
    std::fill(plan.owner.begin() + block_first(num_nodes, num_parts, p),
              plan.owner.begin() + block_first(num_nodes, num_parts, p + 1), p);
  }
  return plan;
}

PartitionPlan partition_random(std::int64_t num_nodes, int num_parts, std::uint64_t seed) {
  check_num_parts(num_nodes, num_parts);
  CounterRng rng(seed, 0, 0, RngPurpose::Init);
  PartitionPlan plan{num_parts, std::vector<std::int32_t>(static_cast<std::size_t>(num_nodes))};
  for (std::int64_t v = 0; v < num_nodes; ++v) {
    std::uint64_t word = rng.words(static_cast<std::uint64_t>(v), 0)[0];
    plan.owner[v] = static_cast<std::int32_t>((word * static_cast<std::uint64_t>(num_parts)) >> 32);
  }
  return plan;
}

PartitionPlan make_partition(PartitionMethod method, const Csr& graph,
                             std::span<const GlobalId> train_idx, int num_parts,
                             std::uint64_t seed) {
  switch (method) {
    case PartitionMethod::Metis: return partition_metis(graph, train_idx, num_parts, seed);
    case PartitionMethod::Random: return partition_random(graph.num_rows(), num_parts, seed);
    case PartitionMethod::Block: return partition_block(graph.num_rows(), num_parts);
  }
  TESSERA_FAIL(InvalidArgument, "unknown PartitionMethod ", static_cast<int>(method));
}

PartitionStats partition_stats(const Csr& graph, const PartitionPlan& plan,
                               std::span<const GlobalId> train_idx) {
  const std::int64_t n = graph.num_rows();
  const int k = plan.num_parts;
  TESSERA_CHECK(k >= 1, InvalidArgument, "partition plan has ", k, " parts, expected >= 1");
  TESSERA_CHECK(graph.num_cols() == n, InvalidArgument,
                "partition_stats needs a square graph, got ", n, " x ", graph.num_cols());
  TESSERA_CHECK(static_cast<std::int64_t>(plan.owner.size()) == n, InvalidArgument,
                "partition plan covers ", plan.owner.size(), " nodes, graph has ", n);
  std::int64_t first_bad = n;
#pragma omp parallel for schedule(static) reduction(min : first_bad)
  for (std::int64_t v = 0; v < n; ++v) {
    if (plan.owner[v] < 0 || plan.owner[v] >= k) first_bad = std::min(first_bad, v);
  }
  TESSERA_CHECK(first_bad == n, InvalidArgument, "partition plan gives node ", first_bad,
                " to part ", first_bad < n ? plan.owner[first_bad] : 0, ", expected [0, ", k, ")");

  CutCounts cut = (k + 63) / 64 <= kMaxBitmaskWords ? count_cut_bitmask(graph, plan.owner, k)
                                                    : count_cut_by_part(graph, plan.owner, k);
  PartitionStats stats;
  stats.edge_cut = cut.edge_cut;
  stats.halo_nodes = std::move(cut.halo_nodes);
  stats.owned_nodes.assign(k, 0);
  for (std::int32_t p : plan.owner) ++stats.owned_nodes[p];
  stats.train_nodes.assign(k, 0);
  for (GlobalId v : train_idx) {
    TESSERA_CHECK(v >= 0 && v < n, InvalidArgument, "training node ", v, " out of range [0, ", n,
                  ")");
    ++stats.train_nodes[plan.owner[v]];
  }
  for (std::int64_t h : stats.halo_nodes) stats.halo_nodes_total += h;
  stats.replication_factor =
      n ? static_cast<double>(n + stats.halo_nodes_total) / static_cast<double>(n) : 1.0;
  stats.node_imbalance = imbalance(stats.owned_nodes);
  stats.train_imbalance = imbalance(stats.train_nodes);
  return stats;
}

}  // namespace tessera
