// SPDX-License-Identifier: Apache-2.0
// Cutting a part out of a whole dataset: owned ids, halo discovery (neighbours owned elsewhere),
// local CSR with sorted local columns, the halo plan (which owned rows each peer needs — the
// graph is symmetric, so those are the owned rows with a neighbour on that peer), global
// degrees, and the owned rows of features, labels and splits.
#include "partition/graph_part.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "core/error.h"

namespace tessera {
namespace {

constexpr NodeId kNotLocal = -1;
constexpr NodeId kHaloPending = -2;

// Local rows of the split ids owned by `part`, increasing.
std::vector<NodeId> local_split(const std::vector<GlobalId>& ids, const PartitionPlan& plan,
                                int part, const std::vector<NodeId>& local_of) {
  std::vector<NodeId> rows;
  for (GlobalId v : ids) {
    if (plan.owner[static_cast<std::size_t>(v)] == part) rows.push_back(local_of[v]);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

// Every id in [0, limit), else InvalidInput "<where>: <what> <id> is outside [0, limit) (<of>)".
template <class Id>
void check_ids_below(const std::vector<Id>& ids, std::int64_t limit, const std::string& where,
                     const char* what, const char* of) {
  for (Id v : ids) {
    TESSERA_CHECK(v >= 0 && v < limit, InvalidInput, where, ": ", what, " ", v,
                  " is outside [0, ", limit, ") (", of, ")");
  }
}

void gather_owned_rows(Tensor& out, const Tensor& in, const std::vector<GlobalId>& ids) {
  const auto n = static_cast<std::int64_t>(ids.size());
  out = Tensor(n, in.cols());
  if (out.empty()) return;
  const std::size_t row_bytes = static_cast<std::size_t>(in.cols()) * sizeof(float);
#pragma omp parallel for schedule(static) if (n >= 4096)
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(out.row<float>(i), in.row<float>(ids[static_cast<std::size_t>(i)]), row_bytes);
  }
}

}  // namespace

DatasetInfo dataset_info(const Dataset& d) { return dataset_info(d, fingerprint(d)); }

DatasetInfo dataset_info(const Dataset& d, std::uint64_t fingerprint) {
  DatasetInfo info;
  info.name = d.name;
  info.task = d.task;
  info.eval_metric = d.eval_metric;
  info.num_classes = d.num_classes;
  info.num_tasks = d.num_tasks;
  info.num_nodes = d.num_nodes();
  info.num_edges = d.graph.nnz();
  info.num_features = d.num_features();
  info.fingerprint = fingerprint;
  return info;
}

Dataset load_for_partitioning(const std::string& spec, const LoadOptions& options,
                              DatasetInfo& info) {
  if (!is_hdf5_spec(spec)) {
    Dataset dataset = load_dataset(spec, options);
    info = dataset_info(dataset);
    return dataset;
  }
  DatasetWithoutFeatures loaded = read_hdf5_without_features(spec, options);
  info = dataset_info(loaded.dataset, loaded.fingerprint);
  info.num_features = loaded.num_features;
  return std::move(loaded.dataset);
}

Csr training_graph(const Dataset& dataset) {
  return dataset.graph.without_self_loops().symmetrize();
}

PartBuilder::PartBuilder(const Dataset& dataset, const Csr& graph, const PartitionPlan& plan,
                         const DatasetInfo& info, std::span<const GlobalId> order)
    : dataset_(dataset),
      graph_(graph),
      plan_(plan),
      info_(info),
      order_(order),
      plan_fingerprint_(tessera::plan_fingerprint(plan)) {
  TESSERA_CHECK(order.empty() || static_cast<std::int64_t>(order.size()) == dataset.num_nodes(),
                InvalidArgument, "PartBuilder: an order of ", order.size(), " nodes for ",
                dataset.num_nodes());
  TESSERA_CHECK(graph.num_rows() == dataset.num_nodes() && graph.num_cols() == graph.num_rows(),
                InvalidArgument, "PartBuilder: graph has ", graph.num_rows(), " rows, dataset ",
                dataset.num_nodes(), " nodes");
  TESSERA_CHECK(static_cast<std::int64_t>(plan.owner.size()) == dataset.num_nodes(),
                InvalidArgument, "PartBuilder: plan covers ", plan.owner.size(), " nodes, dataset has ",
                dataset.num_nodes());
  for (std::size_t v = 0; v < plan.owner.size(); ++v) {
    TESSERA_CHECK(plan.owner[v] >= 0 && plan.owner[v] < plan.num_parts, InvalidArgument,
                  "PartBuilder: node ", v, " is owned by part ", plan.owner[v], ", outside [0, ",
                  plan.num_parts, ")");
  }
}

namespace {

// Owned ids, then the halo: neighbours owned elsewhere, grouped by owner, increasing id within a
// group, with the receive offsets of the halo plan. local_of (global N) gets every local id.
void localise(LocalGraph& g, const Csr& graph, const std::vector<std::int32_t>& owner,
              std::vector<NodeId>& local_of) {
  const std::int64_t num_global = graph.num_rows();
  for (GlobalId v = 0; v < num_global; ++v) {
    if (owner[static_cast<std::size_t>(v)] == g.part) g.owned_ids.push_back(v);
  }
  const std::int64_t n = g.num_owned();
  TESSERA_CHECK(n < (std::int64_t{1} << 31), InvalidInput, "part ", g.part, " owns ", n,
                " nodes; local ids are 32-bit");
  local_of.assign(static_cast<std::size_t>(num_global), kNotLocal);
  for (std::int64_t i = 0; i < n; ++i) local_of[g.owned_ids[i]] = static_cast<NodeId>(i);
  const EdgeOffset* indptr = graph.indptr().data();
  const NodeId* indices = graph.indices().data();
  for (GlobalId v : g.owned_ids) {
    for (EdgeOffset j = indptr[v]; j < indptr[v + 1]; ++j) {
      const NodeId u = indices[j];
      if (local_of[u] == kNotLocal) {
        local_of[u] = kHaloPending;
        g.halo_ids.push_back(u);
      }
    }
  }
  std::sort(g.halo_ids.begin(), g.halo_ids.end(), [&](GlobalId a, GlobalId b) {
    return std::pair(owner[a], a) < std::pair(owner[b], b);
  });
  const std::int64_t h = g.num_halo();
  TESSERA_CHECK(n + h < (std::int64_t{1} << 31), InvalidInput, "part ", g.part, " has ", n + h,
                " local nodes; local ids are 32-bit");
  g.halo.recv_offsets.assign(static_cast<std::size_t>(g.num_parts) + 1, 0);
  for (std::int64_t j = 0; j < h; ++j) {
    local_of[g.halo_ids[j]] = static_cast<NodeId>(n + j);
    ++g.halo.recv_offsets[owner[g.halo_ids[j]] + 1];
  }
  std::partial_sum(g.halo.recv_offsets.begin(), g.halo.recv_offsets.end(),
                   g.halo.recv_offsets.begin());
}

// The local adjacency (N, N + H), rows sorted by local column.
Csr local_adjacency(const LocalGraph& g, const Csr& graph, const std::vector<NodeId>& local_of) {
  const std::int64_t n = g.num_owned();
  const EdgeOffset* indptr = graph.indptr().data();
  const NodeId* indices = graph.indices().data();
  std::vector<EdgeOffset> local_indptr(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    local_indptr[i + 1] = local_indptr[i] + graph.degree(g.owned_ids[i]);
  }
  std::vector<NodeId> local_indices(static_cast<std::size_t>(local_indptr[n]));
#pragma omp parallel for schedule(dynamic, 1024) if (n >= 4096)
  for (std::int64_t i = 0; i < n; ++i) {
    const GlobalId v = g.owned_ids[i];
    NodeId* row = local_indices.data() + local_indptr[i];
    for (EdgeOffset j = indptr[v]; j < indptr[v + 1]; ++j) *row++ = local_of[indices[j]];
    std::sort(local_indices.data() + local_indptr[i], row);
  }
  return Csr(n, n + g.num_halo(), std::move(local_indptr), std::move(local_indices));
}

// The send lists of the halo plan: owned rows with a neighbour on peer q, per q, increasing
// local id.
void send_lists(LocalGraph& g, const Csr& graph, const std::vector<std::int32_t>& owner) {
  const int k = g.num_parts;
  const EdgeOffset* indptr = graph.indptr().data();
  const NodeId* indices = graph.indices().data();
  std::vector<std::vector<NodeId>> send(static_cast<std::size_t>(k));
  std::vector<int> last_row_for_peer(static_cast<std::size_t>(k), -1);
  for (std::int64_t i = 0; i < g.num_owned(); ++i) {
    const GlobalId v = g.owned_ids[i];
    for (EdgeOffset j = indptr[v]; j < indptr[v + 1]; ++j) {
      const int q = owner[indices[j]];
      if (q != g.part && last_row_for_peer[q] != i) {
        last_row_for_peer[q] = static_cast<int>(i);
        send[q].push_back(static_cast<NodeId>(i));
      }
    }
  }
  g.halo.send_offsets.assign(static_cast<std::size_t>(k) + 1, 0);
  for (int q = 0; q < k; ++q) {
    g.halo.send_offsets[q + 1] = g.halo.send_offsets[q] + static_cast<std::int64_t>(send[q].size());
    g.halo.send_rows.insert(g.halo.send_rows.end(), send[q].begin(), send[q].end());
  }
}

}  // namespace

GraphPart PartBuilder::build(int part) const {
  const int k = plan_.num_parts;
  TESSERA_CHECK(part >= 0 && part < k, InvalidArgument, "part ", part, " of ", k);
  GraphPart out;
  out.dataset = info_;
  LocalGraph& g = out.graph;
  g.part = part;
  g.num_parts = k;
  g.plan_fingerprint = plan_fingerprint_;
  std::vector<NodeId> local_of;
  localise(g, graph_, plan_.owner, local_of);
  g.adjacency = local_adjacency(g, graph_, local_of);
  send_lists(g, graph_, plan_.owner);
  const std::int64_t n = g.num_owned(), h = g.num_halo();
  g.degrees.resize(static_cast<std::size_t>(n + h));
  for (std::int64_t c = 0; c < n + h; ++c) {
    const GlobalId v = c < n ? g.owned_ids[c] : g.halo_ids[c - n];
    g.degrees[c] = static_cast<float>(graph_.degree(v) + 1);
  }
  gather_owned_rows(out.features, dataset_.features, g.owned_ids);
  if (dataset_.task == TaskType::MultiClass) {
    out.labels.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) out.labels[i] = dataset_.labels[g.owned_ids[i]];
  } else {
    gather_owned_rows(out.targets, dataset_.targets, g.owned_ids);
  }
  out.train_rows = local_split(dataset_.train_idx, plan_, part, local_of);
  out.valid_rows = local_split(dataset_.valid_idx, plan_, part, local_of);
  out.test_rows = local_split(dataset_.test_idx, plan_, part, local_of);
  if (!order_.empty()) record_input_ids(out, order_);
  return out;
}

GraphPart whole_graph_part(Dataset&& dataset) {
  const DatasetInfo info = dataset_info(dataset);
  return whole_graph_part(std::move(dataset), info);
}

GraphPart whole_graph_part(Dataset&& dataset, const DatasetInfo& info) {
  GraphPart out;
  out.dataset = info;
  LocalGraph& g = out.graph;
  const std::int64_t n = dataset.num_nodes();
  g.owned_ids.resize(static_cast<std::size_t>(n));
  std::iota(g.owned_ids.begin(), g.owned_ids.end(), GlobalId{0});
  g.adjacency = training_graph(dataset);
  dataset.graph = Csr();
  g.degrees.resize(static_cast<std::size_t>(n));
  for (std::int64_t v = 0; v < n; ++v) g.degrees[v] = static_cast<float>(g.adjacency.degree(v) + 1);
  g.halo.send_offsets = {0, 0};
  g.halo.recv_offsets = {0, 0};
  out.features = std::move(dataset.features);
  out.labels = std::move(dataset.labels);
  out.targets = std::move(dataset.targets);
  auto rows = [](const std::vector<GlobalId>& ids) {
    std::vector<NodeId> r(ids.begin(), ids.end());
    std::sort(r.begin(), r.end());
    return r;
  };
  out.train_rows = rows(dataset.train_idx);
  out.valid_rows = rows(dataset.valid_idx);
  out.test_rows = rows(dataset.test_idx);
  return out;
}

void record_input_ids(GraphPart& part, std::span<const GlobalId> order) {
  LocalGraph& g = part.graph;
  g.input_ids.resize(g.owned_ids.size());
  for (std::size_t i = 0; i < g.owned_ids.size(); ++i) {
    const GlobalId v = g.owned_ids[i];
    TESSERA_CHECK(v >= 0 && v < static_cast<GlobalId>(order.size()), InvalidArgument,
                  "record_input_ids: owned node ", v, " is outside an order of ", order.size());
    g.input_ids[i] = order[static_cast<std::size_t>(v)];
  }
}

void check_parts_usable(const PartitionStats& stats, const std::string& method) {
  for (std::size_t p = 0; p < stats.train_nodes.size(); ++p) {
    TESSERA_CHECK(stats.owned_nodes[p] > 0, InvalidInput, "partition (", method, "): part ", p,
                  " owns no node; use fewer parts");
    TESSERA_CHECK(stats.train_nodes[p] > 0, InvalidInput, "partition (", method, "): part ", p,
                  " has no training node; use --partition metis or fewer parts");
  }
}

void validate(const GraphPart& p, const std::string& where) {
  const LocalGraph& g = p.graph;
  const std::int64_t n = g.num_owned();
  const std::int64_t h = g.num_halo();
  TESSERA_CHECK(g.num_parts >= 1 && g.part >= 0 && g.part < g.num_parts, InvalidInput, where,
                ": part ", g.part, " of ", g.num_parts);
  TESSERA_CHECK(n >= 1, InvalidInput, where, ": part ", g.part, " owns no node");
  TESSERA_CHECK(g.adjacency.num_rows() == n && g.adjacency.num_cols() == n + h, InvalidInput,
                where, ": adjacency is (", g.adjacency.num_rows(), ", ", g.adjacency.num_cols(),
                "), expected (", n, ", ", n + h, ")");
  TESSERA_CHECK(static_cast<std::int64_t>(g.degrees.size()) == n + h, InvalidInput, where,
                ": ", g.degrees.size(), " degrees for ", n + h, " local nodes");
  for (float d : g.degrees) {
    TESSERA_CHECK(d >= 1.0f && std::isfinite(d), InvalidInput, where, ": degree ", d,
                  " (expected >= 1: every node has its self loop)");
  }
  const std::int64_t global_n = p.dataset.num_nodes;
  check_ids_below(g.owned_ids, global_n, where, "owned id", "the global node count");
  check_ids_below(g.halo_ids, global_n, where, "halo id", "the global node count");
  TESSERA_CHECK(g.input_ids.empty() || static_cast<std::int64_t>(g.input_ids.size()) == n,
                InvalidInput, where, ": ", g.input_ids.size(), " input ids for ", n,
                " owned nodes");
  check_ids_below(g.input_ids, global_n, where, "input id", "the global node count");
  g.halo.validate(n, g.part, where);
  TESSERA_CHECK(g.halo.num_halo() == h, InvalidInput, where, ": halo plan receives ",
                g.halo.num_halo(), " rows, the part has ", h, " halo nodes");
  TESSERA_CHECK(g.halo.num_peers() == g.num_parts, InvalidInput, where, ": halo plan has ",
                g.halo.num_peers(), " peers for ", g.num_parts, " parts");
  TESSERA_CHECK(p.features.rows() == n && p.features.cols() == p.dataset.num_features,
                InvalidInput, where, ": features are ", p.features.shape_string(), ", expected (",
                n, ", ", p.dataset.num_features, ")");
  if (p.dataset.task == TaskType::MultiClass) {
    TESSERA_CHECK(static_cast<std::int64_t>(p.labels.size()) == n, InvalidInput, where, ": ",
                  p.labels.size(), " labels for ", n, " owned nodes");
    for (std::int64_t y : p.labels) {
      TESSERA_CHECK(y >= -1 && y < p.dataset.num_classes, InvalidInput, where, ": label ", y,
                    " outside [-1, ", p.dataset.num_classes, ")");
    }
  } else {
    TESSERA_CHECK(p.targets.rows() == n && p.targets.cols() == p.dataset.num_tasks, InvalidInput,
                  where, ": targets are ", p.targets.shape_string(), ", expected (", n, ", ",
                  p.dataset.num_tasks, ")");
  }
  check_ids_below(p.train_rows, n, where, "train row", "the owned rows");
  check_ids_below(p.valid_rows, n, where, "valid row", "the owned rows");
  check_ids_below(p.test_rows, n, where, "test row", "the owned rows");
}

}  // namespace tessera
