// SPDX-License-Identifier: Apache-2.0
// Locality-aware node orders (partition/node_order.h).
#include "partition/node_order.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "core/kernels.h"

namespace tessera {
namespace {

// Breadth-first search from `root` over the symmetric pattern `g`; `dist` is -1 everywhere on
// entry and again on return. Returns the eccentricity of root and writes the nodes of the last
// level to `last`.
std::int64_t bfs_levels(const Csr& g, NodeId root, std::vector<std::int64_t>& dist,
                        std::vector<NodeId>& queue, std::vector<NodeId>& last) {
  queue.assign(1, root);
  dist[static_cast<std::size_t>(root)] = 0;
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const NodeId v = queue[head];
    for (EdgeOffset e = g.indptr()[v]; e < g.indptr()[v + 1]; ++e) {
      const NodeId u = g.indices()[e];
      if (dist[static_cast<std::size_t>(u)] < 0) {
        dist[static_cast<std::size_t>(u)] = dist[static_cast<std::size_t>(v)] + 1;
        queue.push_back(u);
      }
    }
  }
  const std::int64_t eccentricity = dist[static_cast<std::size_t>(queue.back())];
  last.clear();
  for (const NodeId v : queue) {
    if (dist[static_cast<std::size_t>(v)] == eccentricity) last.push_back(v);
    dist[static_cast<std::size_t>(v)] = -1;
  }
  return eccentricity;
}

// George and Liu's pseudo-peripheral node of start's component: from the current node, move to
// a node of least degree (then lowest id) in its last BFS level while that raises the
// eccentricity.
NodeId pseudo_peripheral(const Csr& g, NodeId start, std::vector<std::int64_t>& dist,
                         std::vector<NodeId>& queue) {
  std::vector<NodeId> last;
  NodeId root = start;
  std::int64_t eccentricity = bfs_levels(g, root, dist, queue, last);
  while (true) {
    const NodeId candidate = *std::min_element(last.begin(), last.end(), [&](NodeId a, NodeId b) {
      return std::pair(g.degree(a), a) < std::pair(g.degree(b), b);
    });
    std::vector<NodeId> candidate_last;
    const std::int64_t e = bfs_levels(g, candidate, dist, queue, candidate_last);
    if (e <= eccentricity) return root;
    root = candidate;
    eccentricity = e;
    last = std::move(candidate_last);
  }
}

void check_square_for_rcm(const Csr& g) {
  TESSERA_CHECK(g.num_rows() == g.num_cols(), InvalidArgument,
                "reverse_cuthill_mckee: the graph must be square, got ", g.num_rows(), " x ",
                g.num_cols());
}

}  // namespace

std::vector<GlobalId> reverse_cuthill_mckee(const Csr& graph) {
  check_square_for_rcm(graph);
  return reverse_cuthill_mckee_symmetric(graph.without_self_loops().symmetrize());
}

std::vector<GlobalId> reverse_cuthill_mckee_symmetric(const Csr& g) {
  check_square_for_rcm(g);
  const std::int64_t n = g.num_rows();
  std::vector<GlobalId> order;
  order.reserve(static_cast<std::size_t>(n));
  std::vector<char> placed(static_cast<std::size_t>(n), 0);
  std::vector<std::int64_t> dist(static_cast<std::size_t>(n), -1);
  std::vector<NodeId> queue, next;
  for (std::int64_t start = 0; start < n; ++start) {
    if (placed[static_cast<std::size_t>(start)]) continue;
    const NodeId root = pseudo_peripheral(g, static_cast<NodeId>(start), dist, queue);
    placed[static_cast<std::size_t>(root)] = 1;
    order.push_back(root);
    for (std::size_t head = order.size() - 1; head < order.size(); ++head) {
      const auto v = static_cast<NodeId>(order[head]);
      next.clear();
      for (EdgeOffset e = g.indptr()[v]; e < g.indptr()[v + 1]; ++e) {
        const NodeId u = g.indices()[e];
        if (!placed[static_cast<std::size_t>(u)]) {
          placed[static_cast<std::size_t>(u)] = 1;
          next.push_back(u);
        }
      }
      std::sort(next.begin(), next.end(), [&](NodeId a, NodeId b) {
        return std::pair(g.degree(a), a) < std::pair(g.degree(b), b);
      });
      order.insert(order.end(), next.begin(), next.end());
    }
  }
  std::reverse(order.begin(), order.end());
  return order;
}

std::vector<GlobalId> order_by_parts(const PartitionPlan& plan) {
  TESSERA_CHECK(plan.num_parts >= 1, InvalidArgument, "order_by_parts: ", plan.num_parts, " parts");
  for (std::size_t v = 0; v < plan.owner.size(); ++v) {
    TESSERA_CHECK(plan.owner[v] >= 0 && plan.owner[v] < plan.num_parts, InvalidArgument,
                  "order_by_parts: node ", v, " has part ", plan.owner[v], ", outside [0, ",
                  plan.num_parts, ")");
  }
  return group_nodes_by_part(plan.owner, plan.num_parts).nodes;
}

std::vector<GlobalId> inverse_order(std::span<const GlobalId> order) {
  const auto n = static_cast<GlobalId>(order.size());
  std::vector<GlobalId> position(order.size(), -1);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const GlobalId v = order[i];
    TESSERA_CHECK(v >= 0 && v < n && position[static_cast<std::size_t>(v)] < 0, InvalidArgument,
                  "node order: entry ", i, " (", v, ") is out of [0, ", n, ") or repeated");
    position[static_cast<std::size_t>(v)] = static_cast<GlobalId>(i);
  }
  return position;
}

namespace {

// permute_symmetric with the inverse of `order` given.
Csr permute_symmetric(const Csr& a, std::span<const GlobalId> order,
                      std::span<const GlobalId> position) {
  const std::int64_t n = a.num_rows();
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    indptr[static_cast<std::size_t>(i) + 1] =
        indptr[static_cast<std::size_t>(i)] + a.degree(order[static_cast<std::size_t>(i)]);
  }
  std::vector<NodeId> indices(static_cast<std::size_t>(a.nnz()));
  std::vector<float> values(a.has_values() ? indices.size() : 0);
  std::vector<std::pair<NodeId, float>> row;
#pragma omp parallel for schedule(dynamic, 1024) private(row)
  for (std::int64_t i = 0; i < n; ++i) {
    const GlobalId old = order[static_cast<std::size_t>(i)];
    const EdgeOffset begin = indptr[static_cast<std::size_t>(i)];
    const EdgeOffset end = indptr[static_cast<std::size_t>(i) + 1];
    if (!a.has_values()) {  // the columns alone, sorted where they land
      EdgeOffset out = begin;
      for (EdgeOffset e = a.indptr()[old]; e < a.indptr()[old + 1]; ++e) {
        indices[static_cast<std::size_t>(out++)] =
            static_cast<NodeId>(position[static_cast<std::size_t>(a.indices()[e])]);
      }
      std::sort(indices.begin() + begin, indices.begin() + end);
      continue;
    }
    row.clear();
    for (EdgeOffset e = a.indptr()[old]; e < a.indptr()[old + 1]; ++e) {
      row.emplace_back(static_cast<NodeId>(position[static_cast<std::size_t>(a.indices()[e])]),
                       a.values()[e]);
    }
    std::sort(row.begin(), row.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    EdgeOffset out = begin;
    for (const auto& [col, value] : row) {
      indices[static_cast<std::size_t>(out)] = col;
      values[static_cast<std::size_t>(out)] = value;
      ++out;
    }
  }
  return Csr(n, n, std::move(indptr), std::move(indices), std::move(values));
}

}  // namespace

Csr permute_symmetric(const Csr& a, std::span<const GlobalId> order) {
  const std::int64_t n = a.num_rows();
  TESSERA_CHECK(a.num_cols() == n && static_cast<std::int64_t>(order.size()) == n, InvalidArgument,
                "permute_symmetric: needs a square matrix and an order of its ", n, " rows, got ",
                a.num_rows(), " x ", a.num_cols(), " and ", order.size());
  return permute_symmetric(a, order, inverse_order(order));
}

std::int64_t ordered_bandwidth(const Csr& a, std::span<const GlobalId> order) {
  TESSERA_CHECK(
      order.empty() ||
          (static_cast<std::int64_t>(order.size()) == a.num_rows() && a.num_cols() == a.num_rows()),
      InvalidArgument, "ordered_bandwidth: an order of ", order.size(), " nodes for a ",
      a.num_rows(), " x ", a.num_cols(), " matrix (an order needs a square one of as many rows)");
  std::vector<GlobalId> position;
  if (!order.empty()) position = inverse_order(order);
  const auto at = [&](std::int64_t v) {
    return position.empty() ? v : position[static_cast<std::size_t>(v)];
  };
  std::int64_t widest = 0;
  for (std::int64_t v = 0; v < a.num_rows(); ++v) {
    for (EdgeOffset e = a.indptr()[v]; e < a.indptr()[v + 1]; ++e) {
      widest = std::max(widest, std::abs(at(v) - at(a.indices()[e])));
    }
  }
  return widest;
}

namespace {

constexpr std::pair<NodeOrder, const char*> kNodeOrders[] = {{NodeOrder::Rcm, "rcm"},
                                                             {NodeOrder::None, "none"}};

// The rows of `t` in the new order (t itself when empty).
Tensor reorder_rows(const Tensor& t, std::span<const NodeId> rows) {
  if (t.empty()) return Tensor();
  Tensor out(static_cast<std::int64_t>(rows.size()), t.cols(), t.dtype());
  gather_rows(out, t, rows);
  return out;
}

}  // namespace

NodeOrder parse_node_order(const std::string& text) {
  for (const auto& [order, name] : kNodeOrders)
    if (text == name) return order;
  TESSERA_FAIL(InvalidArgument, "unknown node order '", text, "' (expected rcm or none)");
}

std::vector<std::string> node_order_names() {
  std::vector<std::string> names;
  for (const auto& entry : kNodeOrders) names.emplace_back(entry.second);
  return names;
}

std::string to_string(NodeOrder order) {
  for (const auto& [o, name] : kNodeOrders)
    if (o == order) return name;
  TESSERA_FAIL(Internal, "node order ", static_cast<int>(order), " has no name");
}

namespace {

// Every per-node array of `dataset` but its graph moved to the new ids (`position`: the inverse
// of `order`).
void renumber_node_arrays(Dataset& dataset, std::span<const GlobalId> order,
                          std::span<const GlobalId> position) {
  const std::int64_t n = dataset.num_nodes();
  const std::vector<NodeId> rows(order.begin(), order.end());
  dataset.features = reorder_rows(dataset.features, rows);
  dataset.targets = reorder_rows(dataset.targets, rows);
  if (!dataset.labels.empty()) {
    std::vector<std::int64_t> labels(dataset.labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i)
      labels[i] = dataset.labels[static_cast<std::size_t>(order[i])];
    dataset.labels = std::move(labels);
  }
  for (std::vector<GlobalId>* split : {&dataset.train_idx, &dataset.valid_idx, &dataset.test_idx}) {
    for (GlobalId& v : *split) {
      TESSERA_CHECK(v >= 0 && v < n, InvalidArgument, "renumber_dataset: split node ", v,
                    " is out of [0, ", n, ")");
      v = position[static_cast<std::size_t>(v)];
    }
  }
}

// `plan` moved to the new ids.
PartitionPlan renumbered_plan(const PartitionPlan& plan, std::span<const GlobalId> order) {
  PartitionPlan out;
  out.num_parts = plan.num_parts;
  out.owner.resize(plan.owner.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    out.owner[i] = plan.owner[static_cast<std::size_t>(order[i])];
  return out;
}

}  // namespace

void renumber_dataset(Dataset& dataset, std::span<const GlobalId> order) {
  const std::int64_t n = dataset.num_nodes();
  TESSERA_CHECK(static_cast<std::int64_t>(order.size()) == n, InvalidArgument,
                "renumber_dataset: an order of ", order.size(), " nodes for ", n);
  const std::vector<GlobalId> position = inverse_order(order);
  renumber_node_arrays(dataset, order, position);
  dataset.graph = permute_symmetric(dataset.graph, order, position);
}

PartitionPlan renumber_plan(const PartitionPlan& plan, std::span<const GlobalId> order) {
  TESSERA_CHECK(order.size() == plan.owner.size(), InvalidArgument, "renumber_plan: an order of ",
                order.size(), " nodes for a plan of ", plan.owner.size());
  inverse_order(order);  // a permutation, or InvalidArgument
  return renumbered_plan(plan, order);
}

std::vector<GlobalId> renumber_partitioned(NodeOrder kind, Dataset& dataset, Csr& graph,
                                           PartitionPlan& plan) {
  if (kind == NodeOrder::None) return {};
  std::vector<GlobalId> order = reverse_cuthill_mckee_symmetric(graph);
  const std::vector<GlobalId> position = inverse_order(order);
  renumber_node_arrays(dataset, order, position);
  // The parts are cut from the training graph: the dataset's own graph is not moved but dropped,
  // its N nodes kept.
  dataset.graph =
      Csr(dataset.num_nodes(), dataset.num_nodes(),
          std::vector<EdgeOffset>(static_cast<std::size_t>(dataset.num_nodes()) + 1, 0), {});
  graph = permute_symmetric(graph, order, position);
  plan = renumbered_plan(plan, order);
  return order;
}

}  // namespace tessera
