// SPDX-License-Identifier: Apache-2.0
// Locality-aware node orders: reverse Cuthill-McKee against hand-computed orders, on scrambled
// paths and grids (bandwidth back to the natural one's or below), with self loops and repeated
// entries ignored, on disconnected graphs (a permutation, each component contiguous); the order
// of a partition; P A P^T entry by entry against the definition; renumbering a dataset (every
// array moves with its node) and a partitioned one (each node keeps its part; the parts cut from
// it map back to the dataset's ids); and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "datasets/synthetic.h"
#include "partition/graph_part.h"
#include "partition/node_order.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

// An undirected graph from its edge list, stored one direction only (rows = destinations), with
// ids renamed by `rename` when it is given.
Csr graph_of(std::int64_t n, const std::vector<std::pair<GlobalId, GlobalId>>& edges,
             const std::vector<GlobalId>& rename = {}) {
  std::vector<GlobalId> src, dst;
  for (const auto& [u, v] : edges) {
    src.push_back(rename.empty() ? u : rename[static_cast<std::size_t>(u)]);
    dst.push_back(rename.empty() ? v : rename[static_cast<std::size_t>(v)]);
  }
  return Csr::from_edges(n, src, dst);
}

std::vector<GlobalId> shuffled_ids(std::int64_t n, std::uint32_t seed) {
  std::vector<GlobalId> ids(static_cast<std::size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  return ids;
}

bool is_permutation_of_ids(const std::vector<GlobalId>& order, std::int64_t n) {
  std::vector<GlobalId> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<GlobalId> ids(static_cast<std::size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return sorted == ids;
}

TEST(ReverseCuthillMckee, HandComputedOrders) {
  // Path 0-1-2 and an isolated 3: components by lowest id, each reversed into the whole.
  EXPECT_EQ(reverse_cuthill_mckee(graph_of(4, {{0, 1}, {1, 2}})),
            (std::vector<GlobalId>{3, 2, 1, 0}));
  // Star 0-{1,2,3} with a tail 3-4: George-Liu moves from 0 to the peripheral 4 (eccentricity 3
  // beats 2); Cuthill-McKee from 4 gives 4, 3, 0, then 1 and 2 (degree 1 each, by id).
  EXPECT_EQ(reverse_cuthill_mckee(graph_of(5, {{0, 1}, {0, 2}, {0, 3}, {3, 4}})),
            (std::vector<GlobalId>{2, 1, 0, 3, 4}));
}

TEST(ReverseCuthillMckee, RestoresAScrambledPath) {
  const std::int64_t n = 200;
  std::vector<std::pair<GlobalId, GlobalId>> edges;
  for (GlobalId v = 0; v + 1 < n; ++v) edges.emplace_back(v, v + 1);
  const Csr g = graph_of(n, edges, shuffled_ids(n, 1));
  ASSERT_GT(ordered_bandwidth(g), 100);
  const std::vector<GlobalId> order = reverse_cuthill_mckee(g);
  ASSERT_TRUE(is_permutation_of_ids(order, n));
  EXPECT_EQ(ordered_bandwidth(g, order), 1);
  EXPECT_EQ(order, reverse_cuthill_mckee(g));  // deterministic
}

TEST(ReverseCuthillMckee, NarrowsAScrambledGrid) {
  // A 30 x 40 grid: its natural row-major order has bandwidth 40; breadth-first diagonals from
  // a corner (where the pseudo-peripheral search ends) stay within about the shorter side.
  const std::int64_t rows = 30, cols = 40, n = rows * cols;
  std::vector<std::pair<GlobalId, GlobalId>> edges;
  for (GlobalId r = 0; r < rows; ++r) {
    for (GlobalId c = 0; c < cols; ++c) {
      if (c + 1 < cols) edges.emplace_back(r * cols + c, r * cols + c + 1);
      if (r + 1 < rows) edges.emplace_back(r * cols + c, (r + 1) * cols + c);
    }
  }
  EXPECT_EQ(ordered_bandwidth(graph_of(n, edges)), cols);
  const Csr g = graph_of(n, edges, shuffled_ids(n, 2));
  ASSERT_GT(ordered_bandwidth(g), n / 2);
  const std::vector<GlobalId> order = reverse_cuthill_mckee(g);
  ASSERT_TRUE(is_permutation_of_ids(order, n));
  EXPECT_LE(ordered_bandwidth(g, order), rows + 1);
}

TEST(ReverseCuthillMckee, SelfLoopsAndRepeatedEntriesDoNotCount) {
  // The star 0-{1,2,3} with the tail 3-4 of HandComputedOrders, built entry by entry (rows =
  // destinations): once with a self loop on 1, once with the entries between 0 and 1 repeated.
  // Counted in 1's degree, either would put 1 after 2 among 0's neighbours.
  const auto csr_of_rows = [](const std::vector<std::vector<NodeId>>& rows) {
    std::vector<EdgeOffset> indptr(1, 0);
    std::vector<NodeId> indices;
    for (const auto& row : rows) {
      indices.insert(indices.end(), row.begin(), row.end());
      indptr.push_back(static_cast<EdgeOffset>(indices.size()));
    }
    const auto n = static_cast<std::int64_t>(rows.size());
    return Csr(n, n, std::move(indptr), std::move(indices));
  };
  const std::vector<GlobalId> want = {2, 1, 0, 3, 4};
  EXPECT_EQ(reverse_cuthill_mckee(csr_of_rows({{1, 2, 3}, {0, 1}, {0}, {0, 4}, {3}})), want);
  EXPECT_EQ(reverse_cuthill_mckee(csr_of_rows({{1, 1, 2, 3}, {0, 0}, {0}, {0, 4}, {3}})), want);
}

TEST(ReverseCuthillMckee, DisconnectedGraphsGiveContiguousComponents) {
  // Three cycles of 50 interleaved in id (v % 3 picks the cycle), with self loops, and isolated
  // nodes 150..159.
  const std::int64_t n = 160;
  std::vector<std::pair<GlobalId, GlobalId>> edges;
  for (GlobalId c = 0; c < 3; ++c) {
    for (GlobalId i = 0; i < 50; ++i) {
      edges.emplace_back(3 * i + c, 3 * ((i + 1) % 50) + c);
      edges.emplace_back(3 * i + c, 3 * i + c);
    }
  }
  const Csr g = graph_of(n, edges);
  const std::vector<GlobalId> order = reverse_cuthill_mckee(g);
  ASSERT_TRUE(is_permutation_of_ids(order, n));
  // Each component is one contiguous run; a cycle in breadth-first order has bandwidth 2.
  std::set<GlobalId> seen_components;
  GlobalId previous = -1;
  for (const GlobalId v : order) {
    const GlobalId component = v >= 150 ? v : v % 3;
    if (component != previous) {
      EXPECT_TRUE(seen_components.insert(component).second) << "component " << component;
      previous = component;
    }
  }
  EXPECT_EQ(ordered_bandwidth(g.without_self_loops(), order), 2);
}

TEST(NodeOrder, ByPartsKeepsIdsIncreasingInsideEachPart) {
  PartitionPlan plan;
  plan.num_parts = 3;
  plan.owner = {1, 0, 1, 2, 0};
  EXPECT_EQ(order_by_parts(plan), (std::vector<GlobalId>{1, 4, 0, 2, 3}));
}

TEST(NodeOrder, PermuteSymmetricIsPAPTransposed) {
  std::mt19937 gen(3);
  std::uniform_int_distribution<GlobalId> node(0, 59);
  std::vector<GlobalId> src, dst;
  for (int e = 0; e < 400; ++e) {
    src.push_back(node(gen));
    dst.push_back(node(gen));
  }
  const Csr pattern = Csr::from_edges(60, src, dst);
  std::vector<float> values(static_cast<std::size_t>(pattern.nnz()));
  for (std::size_t e = 0; e < values.size(); ++e) values[e] = 0.5f + static_cast<float>(e);
  const Csr a(60, 60, pattern.indptr(), pattern.indices(), values);
  const std::vector<GlobalId> order = shuffled_ids(60, 4);
  const Csr p = permute_symmetric(a, order);
  std::map<std::pair<GlobalId, GlobalId>, float> want, got;
  for (GlobalId i = 0; i < 60; ++i) {
    for (GlobalId j = 0; j < 60; ++j) {
      const GlobalId r = order[static_cast<std::size_t>(i)], c = order[static_cast<std::size_t>(j)];
      for (EdgeOffset e = a.indptr()[r]; e < a.indptr()[r + 1]; ++e) {
        if (a.indices()[e] == c) want[{i, j}] = a.values()[e];
      }
    }
    for (EdgeOffset e = p.indptr()[i]; e < p.indptr()[i + 1]; ++e) {
      if (e > p.indptr()[i]) {
        EXPECT_LT(p.indices()[e - 1], p.indices()[e]) << "row " << i;
      }
      got[{i, p.indices()[e]}] = p.values()[e];
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_FALSE(permute_symmetric(pattern, order).has_values());
}

TEST(NodeOrder, RefusesWhatIsNotAnOrder) {
  const Csr g = graph_of(3, {{0, 1}, {1, 2}});
  const Csr rectangular(2, 3, {0, 1, 2}, {2, 0});
  const auto refused = [](auto&& body, const std::string& fragment) {
    return test::throws_error(body, ErrorCategory::InvalidArgument, fragment);
  };
  EXPECT_TRUE(refused([] { inverse_order(std::vector<GlobalId>{0, 0, 1}); }, "entry 1 (0)"));
  EXPECT_TRUE(refused([] { inverse_order(std::vector<GlobalId>{0, 3, 1}); }, "entry 1 (3)"));
  EXPECT_TRUE(refused([] { inverse_order(std::vector<GlobalId>{0, -1, 1}); }, "entry 1 (-1)"));
  EXPECT_TRUE(refused([&] { permute_symmetric(g, std::vector<GlobalId>{0, 1}); }, "3 rows"));
  EXPECT_TRUE(refused([&] { ordered_bandwidth(g, std::vector<GlobalId>{1, 0}); }, "2 nodes"));
  EXPECT_TRUE(refused(
      [&] {
        ordered_bandwidth(rectangular, std::vector<GlobalId>{1, 0});
      },
      "2 x 3"));
  PartitionPlan plan;
  plan.num_parts = 2;
  plan.owner = {0, 2, 1};
  EXPECT_TRUE(refused([&] { order_by_parts(plan); }, "node 1 has part 2"));
  plan.num_parts = 0;
  plan.owner.clear();
  EXPECT_TRUE(refused([&] { order_by_parts(plan); }, "0 parts"));
  EXPECT_TRUE(refused([&] { reverse_cuthill_mckee(rectangular); }, "2 x 3"));
  EXPECT_TRUE(refused(
      [&] {
        permute_symmetric(rectangular, std::vector<GlobalId>{0, 1});
      },
      "2 x 3"));
}

// The entries of a pattern as (row, column) pairs.
std::set<std::pair<GlobalId, GlobalId>> entries(const Csr& a) {
  std::set<std::pair<GlobalId, GlobalId>> out;
  for (GlobalId v = 0; v < a.num_rows(); ++v)
    for (EdgeOffset e = a.indptr()[v]; e < a.indptr()[v + 1]; ++e) out.insert({v, a.indices()[e]});
  return out;
}

Dataset small_synthetic(std::uint64_t seed) {
  SyntheticConfig c;
  c.num_nodes = 240;
  c.num_edges = 900;
  c.num_features = 5;
  c.num_classes = 3;
  c.seed = seed;
  return generate_synthetic(c);
}

TEST(NodeOrder, RenumberedDatasetMovesEveryArrayWithItsNode) {
  const Dataset before = small_synthetic(5);
  Dataset after = small_synthetic(5);
  const std::vector<GlobalId> order = shuffled_ids(before.num_nodes(), 6);
  const std::vector<GlobalId> position = inverse_order(order);
  renumber_dataset(after, order);
  std::set<std::pair<GlobalId, GlobalId>> want;
  for (const auto& [v, u] : entries(before.graph))
    want.insert({position[static_cast<std::size_t>(v)], position[static_cast<std::size_t>(u)]});
  EXPECT_EQ(entries(after.graph), want);
  for (GlobalId i = 0; i < after.num_nodes(); ++i) {
    const GlobalId old = order[static_cast<std::size_t>(i)];
    for (std::int64_t f = 0; f < before.num_features(); ++f)
      ASSERT_EQ(after.features.row<float>(i)[f], before.features.row<float>(old)[f])
          << "node " << i;
    EXPECT_EQ(after.labels[static_cast<std::size_t>(i)],
              before.labels[static_cast<std::size_t>(old)]);
  }
  const auto renamed = [&](const std::vector<GlobalId>& ids) {
    std::vector<GlobalId> out;
    for (const GlobalId v : ids) out.push_back(position[static_cast<std::size_t>(v)]);
    return out;
  };
  EXPECT_EQ(after.train_idx, renamed(before.train_idx));
  EXPECT_EQ(after.valid_idx, renamed(before.valid_idx));
  EXPECT_EQ(after.test_idx, renamed(before.test_idx));
}

TEST(NodeOrder, RenumberedTargetsMoveWithTheirNodes) {
  Dataset d;
  d.task = TaskType::MultiLabel;
  d.num_tasks = 2;
  d.graph = graph_of(3, {{0, 1}, {1, 2}});
  d.features = Tensor(3, 1);
  d.targets = Tensor(3, 2);
  for (std::int64_t v = 0; v < 3; ++v) {
    d.features.row<float>(v)[0] = static_cast<float>(v);
    d.targets.row<float>(v)[0] = static_cast<float>(v % 2);
    d.targets.row<float>(v)[1] = static_cast<float>(10 + v);
  }
  d.train_idx = {2, 0};
  renumber_dataset(d, std::vector<GlobalId>{2, 0, 1});
  EXPECT_EQ(d.features.row<float>(0)[0], 2.0f);
  EXPECT_EQ(d.targets.row<float>(0)[1], 12.0f);
  EXPECT_EQ(d.targets.row<float>(1)[1], 10.0f);
  EXPECT_EQ(d.targets.row<float>(2)[0], 1.0f);
  EXPECT_EQ(d.train_idx, (std::vector<GlobalId>{0, 1}));
  EXPECT_TRUE(d.labels.empty());
}

// RCM after a METIS cut: every node keeps its part, the graph is the renumbered one, and the
// parts PartBuilder cuts map back (input_ids) to the dataset's ids and rows.
TEST(NodeOrder, RenumberedPartitionKeepsPartsAndMapsBack) {
  const Dataset given = small_synthetic(7);
  Dataset dataset = small_synthetic(7);
  Csr graph = training_graph(dataset);
  PartitionPlan plan = make_partition(PartitionMethod::Metis, graph, dataset.train_idx, 3, 1);
  const PartitionPlan given_plan = plan;
  const Csr given_graph = training_graph(given);
  EXPECT_TRUE(renumber_partitioned(NodeOrder::None, dataset, graph, plan).empty());
  EXPECT_EQ(plan.owner, given_plan.owner);
  const std::vector<GlobalId> order = renumber_partitioned(NodeOrder::Rcm, dataset, graph, plan);
  ASSERT_EQ(order, reverse_cuthill_mckee(given_graph));
  EXPECT_EQ(dataset.num_nodes(), given.num_nodes());
  EXPECT_EQ(dataset.graph.nnz(), 0) << "the dataset's own graph is dropped, not moved";
  EXPECT_LT(ordered_bandwidth(graph), ordered_bandwidth(given_graph));
  EXPECT_EQ(entries(graph), entries(permute_symmetric(given_graph, order)));
  for (std::size_t i = 0; i < order.size(); ++i)
    EXPECT_EQ(plan.owner[i], given_plan.owner[static_cast<std::size_t>(order[i])]) << i;
  const DatasetInfo info = dataset_info(given);
  const PartBuilder builder(dataset, graph, plan, info, order);
  std::vector<int> seen(order.size(), 0);
  for (int p = 0; p < 3; ++p) {
    const GraphPart part = builder.build(p);
    validate(part, "part");
    const LocalGraph& g = part.graph;
    ASSERT_EQ(g.input_ids.size(), g.owned_ids.size());
    for (std::int64_t i = 0; i < g.num_owned(); ++i) {
      const GlobalId v = g.dataset_ids()[static_cast<std::size_t>(i)];
      ++seen[static_cast<std::size_t>(v)];
      EXPECT_EQ(given_plan.owner[static_cast<std::size_t>(v)], p);
      EXPECT_EQ(part.labels[static_cast<std::size_t>(i)],
                given.labels[static_cast<std::size_t>(v)]);
      for (std::int64_t f = 0; f < given.num_features(); ++f)
        ASSERT_EQ(part.features.row<float>(i)[f], given.features.row<float>(v)[f]) << "node " << v;
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<std::ptrdiff_t>(seen.size()));
}

TEST(NodeOrder, NamesAndRefusals) {
  EXPECT_EQ(node_order_names(), (std::vector<std::string>{"rcm", "none"}));
  for (const std::string& name : node_order_names())
    EXPECT_EQ(to_string(parse_node_order(name)), name);
  const auto refused = [](auto&& body, const std::string& fragment) {
    return test::throws_error(body, ErrorCategory::InvalidArgument, fragment);
  };
  EXPECT_TRUE(refused([] { parse_node_order("metis"); }, "unknown node order 'metis'"));
  Dataset d = small_synthetic(1);
  EXPECT_TRUE(refused(
      [&] {
        renumber_dataset(d, std::vector<GlobalId>{0, 1});
      },
      "2 nodes for 240"));
  std::vector<GlobalId> twice(240, 0);
  EXPECT_TRUE(refused([&] { renumber_dataset(d, twice); }, "repeated"));
  d.train_idx.push_back(240);
  EXPECT_TRUE(refused([&] { renumber_dataset(d, shuffled_ids(240, 1)); }, "split node 240"));
  PartitionPlan plan;
  plan.owner = {0, 0, 0};
  EXPECT_TRUE(refused([&] { renumber_plan(plan, std::vector<GlobalId>{0, 1}); }, "plan of 3"));
  EXPECT_TRUE(refused([&] { renumber_plan(plan, std::vector<GlobalId>{0, 1, 1}); }, "repeated"));
}

}  // namespace
}  // namespace tessera
