// SPDX-License-Identifier: Apache-2.0
// Locality-aware node orders: reverse Cuthill-McKee against hand-computed orders, on scrambled
// paths and grids (bandwidth back to the natural one's or below), with self loops and repeated
// entries ignored, on disconnected graphs (a permutation, each component contiguous); the order
// of a partition; P A P^T entry by entry against the definition; and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
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

}  // namespace
}  // namespace tessera
