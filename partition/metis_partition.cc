// SPDX-License-Identifier: Apache-2.0
// partition_metis: symmetrise, build METIS's xadj and vertex weights, call METIS_PartGraphKway,
// then give every empty part a node (and a training node). Relies on Csr::symmetrize and on
// METIS's idx_t being NodeId (32-bit), so the symmetric pattern's indices are passed in place.
#include "partition/metis_partition.h"

#include <metis.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace tessera {
namespace {

static_assert(std::is_same_v<idx_t, NodeId>, "Tessera expects METIS built with 32-bit idx_t");

constexpr std::int64_t kMetisMax = std::numeric_limits<idx_t>::max();  // 2^31 - 1

const char* metis_status_name(int status) {
  switch (status) {
    case METIS_ERROR_INPUT: return "METIS_ERROR_INPUT";
    case METIS_ERROR_MEMORY: return "METIS_ERROR_MEMORY";
    case METIS_ERROR: return "METIS_ERROR";
    default: return "unknown METIS status";
  }
}

// Lower bound on the entries of graph + graph^T without self loops, without building it: the
// distinct off-diagonal entries of each sorted row (an unsorted row counts 1 if it has any).
// Lets check_metis_limits refuse a huge graph before symmetrize allocates it.
std::int64_t symmetric_entries_lower_bound(const Csr& graph) {
  const EdgeOffset* indptr = graph.indptr().data();
  const NodeId* indices = graph.indices().data();
  std::int64_t total = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : total)
  for (std::int64_t r = 0; r < graph.num_rows(); ++r) {
    std::int64_t distinct = 0;
    bool sorted = true, any = false;
    for (EdgeOffset e = indptr[r]; e < indptr[r + 1]; ++e) {
      if (e > indptr[r] && indices[e] < indices[e - 1]) sorted = false;
      if (indices[e] == r) continue;
      any = true;
      if (e == indptr[r] || indices[e] != indices[e - 1]) ++distinct;
    }
    total += sorted ? distinct : (any ? 1 : 0);
  }
  return total;
}

// Per node: 1 if it is in train_idx (repeats counted once). Returns the number of such nodes.
std::int64_t mark_training_nodes(std::span<const GlobalId> train_idx, std::int64_t num_nodes,
                                 std::vector<std::uint8_t>& is_train) {
  is_train.assign(static_cast<std::size_t>(num_nodes), 0);
  std::int64_t count = 0;
  for (GlobalId v : train_idx) {
    TESSERA_CHECK(v >= 0 && v < num_nodes, InvalidArgument, "partition_metis: training node ", v,
                  " out of range [0, ", num_nodes, ")");
    count += is_train[v] == 0;
    is_train[v] = 1;
  }
  return count;
}

// The node of `part` that minimises (penalty(v), degree, id), or -1 if none qualifies.
template <class Penalty>
std::int64_t pick_node(std::span<const std::int32_t> owner, const Csr& sym, std::int32_t part,
                       Penalty penalty) {
  std::int64_t best = -1;
  std::int64_t best_penalty = 0, best_degree = 0;
  for (std::int64_t v = 0; v < static_cast<std::int64_t>(owner.size()); ++v) {
    if (owner[v] != part) continue;
    const std::int64_t p = penalty(v), d = sym.degree(v);
    if (p < 0) continue;
    if (best < 0 || p < best_penalty || (p == best_penalty && d < best_degree)) {
      best = v;
      best_penalty = p;
      best_degree = d;
    }
  }
  return best;
}

// The repair pass documented in metis_partition.h. Rare (tiny or disconnected graphs), so each
// move scans the nodes: O(moves * N).
void fill_empty_parts(std::vector<std::int32_t>& owner, int num_parts, const Csr& sym,
                      const std::vector<std::uint8_t>& is_train, std::int64_t num_train) {
  std::vector<std::int64_t> nodes(num_parts, 0), trains(num_parts, 0);  // (K) each
  for (std::size_t v = 0; v < owner.size(); ++v) {
    ++nodes[owner[v]];
    trains[owner[v]] += is_train[v];
  }
  auto largest = [](const std::vector<std::int64_t>& counts) {
    return static_cast<std::int32_t>(std::max_element(counts.begin(), counts.end()) -
                                     counts.begin());
  };
  auto move = [&](std::int64_t v, std::int32_t to) {
    --nodes[owner[v]];
    trains[owner[v]] -= is_train[v];
    owner[v] = to;
    ++nodes[to];
    trains[to] += is_train[v];
  };
  for (std::int32_t p = 0; p < num_parts; ++p) {
    if (nodes[p] > 0) continue;
    const std::int32_t donor = largest(nodes);  // >= 2 nodes, since K <= N
    move(pick_node(owner, sym, donor, [&](std::int64_t v) { return is_train[v]; }), p);
  }
  if (num_train < num_parts) return;
  for (std::int32_t p = 0; p < num_parts; ++p) {
    if (trains[p] > 0) continue;
    const std::int32_t donor = largest(trains);  // >= 2 training nodes, by pigeonhole
    move(pick_node(owner, sym, donor, [&](std::int64_t v) { return is_train[v] ? 0 : -1; }), p);
  }
}

}  // namespace

void check_metis_limits(std::int64_t num_nodes, std::int64_t num_directed_edges) {
  TESSERA_CHECK(num_nodes <= kMetisMax, InvalidInput,
                "graph too large for METIS: Debian's METIS uses 32-bit indices: ", num_nodes,
                " nodes exceed 2^31-1");
  TESSERA_CHECK(num_directed_edges <= kMetisMax, InvalidInput,
                "graph too large for METIS: Debian's METIS uses 32-bit indices: ",
                num_directed_edges,
                " directed edges exceed 2^31-1 (counted symmetrised, without self loops)");
}

PartitionPlan partition_metis(const Csr& graph, std::span<const GlobalId> train_idx,
                              int num_parts, std::uint64_t seed) {
  const std::int64_t n = graph.num_rows();
  TESSERA_CHECK(graph.num_cols() == n, InvalidArgument,
                "partition_metis needs a square graph, got ", n, " x ", graph.num_cols());
  check_num_parts(n, num_parts);
  std::vector<std::uint8_t> is_train;  // (N)
  const std::int64_t num_train = mark_training_nodes(train_idx, n, is_train);
  PartitionPlan plan{num_parts, std::vector<std::int32_t>(static_cast<std::size_t>(n), 0)};
  if (num_parts == 1) return plan;

  check_metis_limits(n, symmetric_entries_lower_bound(graph));
  Csr sym = graph.without_self_loops().symmetrize();  // the only copy kept alive
  check_metis_limits(n, sym.nnz());

  idx_t nvtxs = static_cast<idx_t>(n);
  idx_t ncon = num_train > 0 ? 2 : 1;
  idx_t nparts = num_parts;
  std::vector<idx_t> xadj(sym.indptr().begin(), sym.indptr().end());  // (N + 1)
  // METIS takes non-const pointers but does not write adjncy with NUMBERING 0; `sym` is ours.
  idx_t* adjncy = const_cast<idx_t*>(sym.indices().data());  // (E)
  std::vector<idx_t> vwgt(static_cast<std::size_t>(n * ncon), 1);  // (N, ncon)
  if (ncon == 2) {
    for (std::int64_t v = 0; v < n; ++v) vwgt[2 * v + 1] = is_train[v];
  }
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_OBJTYPE] = METIS_OBJTYPE_CUT;
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_SEED] = static_cast<idx_t>((seed ^ (seed >> 32)) & 0x7fffffffu);
  idx_t edge_cut = 0;
  const int status =
      METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy, vwgt.data(), nullptr, nullptr,
                          &nparts, nullptr, nullptr, options, &edge_cut, plan.owner.data());
  TESSERA_CHECK(status == METIS_OK, Internal, "METIS_PartGraphKway failed with ",
                metis_status_name(status), " (", status, ") on ", n, " nodes, ", sym.nnz(),
                " directed edges, ", num_parts, " parts");
  for (std::int64_t v = 0; v < n; ++v) {
    TESSERA_CHECK(plan.owner[v] >= 0 && plan.owner[v] < num_parts, Internal, "METIS gave node ",
                  v, " part ", plan.owner[v], ", expected [0, ", num_parts, ")");
  }
  fill_empty_parts(plan.owner, num_parts, sym, is_train, num_train);
  return plan;
}

}  // namespace tessera
