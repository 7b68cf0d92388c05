// SPDX-License-Identifier: Apache-2.0
// partition_metis and make_partition: coverage of every node by every method, planted
// communities recovered, nodes and training nodes balanced, empty parts repaired, awkward inputs
// (self loops, duplicates, one-directional edges) accepted, determinism and the 32-bit limits.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "partition/metis_partition.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

// Adds u <-> v (both directions) to an edge list.
void add_undirected(std::vector<GlobalId>& src, std::vector<GlobalId>& dst, GlobalId u,
                    GlobalId v) {
  src.push_back(u);
  dst.push_back(v);
  src.push_back(v);
  dst.push_back(u);
}

// `blocks` cliques of `size` nodes; clique b also links its first node to the first node of
// clique b + 1 (a ring of `blocks` bridges). Nodes of one clique are interleaved (node v is in
// clique v % blocks) so that block partitioning does not find the communities by accident.
Csr planted_cliques(int blocks, int size) {
  std::vector<GlobalId> src, dst;
  const GlobalId n = static_cast<GlobalId>(blocks) * size;
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < size; ++i) {
      for (int j = i + 1; j < size; ++j) add_undirected(src, dst, i * blocks + b, j * blocks + b);
    }
    add_undirected(src, dst, b, (b + 1) % blocks);
  }
  return Csr::from_edges(n, src, dst);
}

// side x side grid, 4-neighbour links.
Csr grid(int side) {
  std::vector<GlobalId> src, dst;
  for (int r = 0; r < side; ++r) {
    for (int c = 0; c < side; ++c) {
      const GlobalId v = static_cast<GlobalId>(r) * side + c;
      if (c + 1 < side) add_undirected(src, dst, v, v + 1);
      if (r + 1 < side) add_undirected(src, dst, v, v + side);
    }
  }
  return Csr::from_edges(static_cast<GlobalId>(side) * side, src, dst);
}

std::vector<GlobalId> every_third(std::int64_t n) {
  std::vector<GlobalId> ids;
  for (GlobalId v = 0; v < n; v += 3) ids.push_back(v);
  return ids;
}

void expect_covers(const PartitionPlan& plan, std::int64_t n, int k) {
  EXPECT_EQ(plan.num_parts, k);
  ASSERT_EQ(static_cast<std::int64_t>(plan.owner.size()), n);
  std::vector<std::int64_t> count(k, 0);
  for (std::int32_t p : plan.owner) {
    ASSERT_GE(p, 0);
    ASSERT_LT(p, k);
    ++count[p];
  }
  std::int64_t total = 0;
  for (std::int64_t c : count) total += c;
  EXPECT_EQ(total, n);
}

void expect_error(ErrorCategory category, const std::string& fragment, auto&& call) {
  try {
    call();
    ADD_FAILURE() << "no tessera::Error thrown (expected one containing '" << fragment << "')";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), category) << e.what();
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.message();
  }
}

TEST(MetisPartition, EveryMethodCoversEveryNodeOnce) {
  Csr g = planted_cliques(4, 50);
  std::vector<GlobalId> train = every_third(g.num_rows());
  for (PartitionMethod method :
       {PartitionMethod::Block, PartitionMethod::Random, PartitionMethod::Metis}) {
    for (int k : {1, 2, 3, 4, 7}) {
      SCOPED_TRACE(to_string(method) + ", K = " + std::to_string(k));
      expect_covers(make_partition(method, g, train, k, 3), g.num_rows(), k);
    }
  }
}

TEST(MetisPartition, RecoversPlantedCommunities) {
  Csr g = planted_cliques(4, 50);
  std::vector<GlobalId> train = every_third(g.num_rows());
  PartitionStats metis = partition_stats(g, partition_metis(g, train, 4, 1), train);
  PartitionStats random = partition_stats(g, partition_random(g.num_rows(), 4, 1), train);
  EXPECT_LT(metis.edge_cut, random.edge_cut / 2);
  // The 4 bridges (8 directed entries) are the optimum; allow METIS some slack.
  EXPECT_LE(metis.edge_cut, 8 * 4);
  EXPECT_LE(metis.node_imbalance, 1.05);
}

TEST(MetisPartition, BalancesTrainingNodesConcentratedInOneRegion) {
  // 40 x 40 grid; the training nodes are the top 10 rows only, so a cut that ignores them would
  // put them all in one or two parts.
  const int side = 40;
  Csr g = grid(side);
  std::vector<GlobalId> train;
  for (GlobalId v = 0; v < 10 * side; ++v) train.push_back(v);
  for (int k : {2, 4, 8}) {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE("K = " + std::to_string(k) + ", seed " + std::to_string(seed));
      PartitionStats stats = partition_stats(g, partition_metis(g, train, k, seed), train);
      // METIS's default tolerance is 1.03 per constraint; over seeds 1..20 it gave <= 1.04 here
      // (parts of 1600/K nodes round up), so 1.06 leaves margin without hiding a lost constraint.
      EXPECT_LE(stats.node_imbalance, 1.06);
      EXPECT_LE(stats.train_imbalance, 1.06);
    }
  }
  // METIS balancing nodes alone leaves the training nodes badly unbalanced here, so the
  // bound above really comes from the second constraint.
  PartitionStats nodes_only = partition_stats(g, partition_metis(g, {}, 4, 1), train);
  EXPECT_GT(nodes_only.train_imbalance, 1.5);
}

TEST(MetisPartition, RefusesBadPartCounts) {
  Csr g = planted_cliques(2, 3);  // 6 nodes
  for (PartitionMethod method :
       {PartitionMethod::Block, PartitionMethod::Random, PartitionMethod::Metis}) {
    SCOPED_TRACE(to_string(method));
    expect_error(ErrorCategory::InvalidArgument, "more parts (7) than nodes (6)",
                 [&] { make_partition(method, g, {}, 7, 1); });
    expect_error(ErrorCategory::InvalidArgument, "must be >= 1",
                 [&] { make_partition(method, g, {}, 0, 1); });
  }
}

TEST(MetisPartition, OnePartIsAllZeros) {
  Csr g = planted_cliques(3, 5);
  PartitionPlan plan = partition_metis(g, every_third(g.num_rows()), 1, 9);
  EXPECT_EQ(plan.num_parts, 1);
  EXPECT_EQ(plan.owner, std::vector<std::int32_t>(static_cast<std::size_t>(g.num_rows()), 0));
}

TEST(MetisPartition, TinyAndDisconnectedGraphsHaveNoEmptyPart) {
  Csr isolated = Csr::from_edges(5, {}, {});
  std::vector<GlobalId> train{0, 1, 2, 3};
  for (int k : {2, 3, 4, 5}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    PartitionPlan plan = partition_metis(isolated, train, k, 1);
    expect_covers(plan, 5, k);
    PartitionStats stats = partition_stats(isolated, plan, train);
    for (int p = 0; p < k; ++p) {
      EXPECT_GE(stats.owned_nodes[p], 1) << "part " << p;
      // With 4 training nodes, only K <= 4 promises each part one of them.
      if (k <= 4) {
        EXPECT_GE(stats.train_nodes[p], 1) << "part " << p;
      }
    }
    PartitionStats untrained = partition_stats(isolated, partition_metis(isolated, {}, k, 1), {});
    for (int p = 0; p < k; ++p) EXPECT_GE(untrained.owned_nodes[p], 1) << "part " << p;
  }
  // Two triangles and an isolated node split 7 ways: one node per part.
  std::vector<GlobalId> src{0, 1, 2, 3, 4, 5}, dst{1, 2, 0, 4, 5, 3};
  Csr pieces = Csr::from_edges(7, src, dst);
  PartitionStats stats = partition_stats(pieces, partition_metis(pieces, {}, 7, 2), {});
  EXPECT_EQ(stats.owned_nodes, std::vector<std::int64_t>(7, 1));
}

// Small sparse graphs on which this METIS (5.1.0, seed 1) leaves a part without a training node
// (found by a random search): the repair must hand each such part one.
TEST(MetisPartition, EveryPartGetsATrainingNodeWhenThereAreEnough) {
  struct Case {
    int n, k;
    std::vector<GlobalId> train, src, dst;
  };
  std::vector<Case> cases{
      {13, 5, {10, 2, 3, 11, 5, 6, 11}, {1, 6, 2, 4, 9, 2, 11}, {12, 5, 9, 12, 7, 0, 0}},
      {11, 3, {6, 8, 4, 7, 4}, {3, 10, 7, 5, 9, 3, 4, 8, 0, 7, 6, 9, 10, 6},
       {4, 3, 8, 0, 4, 4, 3, 8, 7, 6, 3, 9, 6, 8}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("N = " + std::to_string(c.n) + ", K = " + std::to_string(c.k));
    Csr g = Csr::from_edges(c.n, c.src, c.dst);
    PartitionPlan plan = partition_metis(g, c.train, c.k, 1);
    expect_covers(plan, c.n, c.k);
    PartitionStats stats = partition_stats(g, plan, c.train);
    for (int p = 0; p < c.k; ++p) {
      EXPECT_GE(stats.owned_nodes[p], 1) << "part " << p;
      EXPECT_GE(stats.train_nodes[p], 1) << "part " << p;
    }
    EXPECT_EQ(plan.owner, partition_metis(g, c.train, c.k, 1).owner);
  }
}

TEST(MetisPartition, AcceptsSelfLoopsDuplicatesAndOneWayEdges) {
  // Built directly so that rows keep their duplicates: row 0 = {0, 0, 1, 1}, row 2 = {2, 3, 3},
  // row 5 = {4, 5}; 1 -> 0 has no reverse edge, nor has 3 -> 2 or 4 -> 5.
  std::vector<EdgeOffset> indptr{0, 4, 4, 7, 7, 7, 9};
  std::vector<NodeId> indices{0, 0, 1, 1, 2, 3, 3, 4, 5};
  Csr g(6, 6, indptr, indices);
  std::vector<GlobalId> train{0, 2, 4};
  for (int k : {2, 3}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    PartitionPlan plan = partition_metis(g, train, k, 4);
    expect_covers(plan, 6, k);
    PartitionStats stats = partition_stats(g, plan, train);
    for (int p = 0; p < k; ++p) EXPECT_GE(stats.train_nodes[p], 1) << "part " << p;
  }
}

TEST(MetisPartition, SameSeedSamePlan) {
  Csr g = grid(30);
  std::vector<GlobalId> train = every_third(g.num_rows());
  for (int k : {2, 5}) {
    PartitionPlan a = partition_metis(g, train, k, 42), b = partition_metis(g, train, k, 42);
    EXPECT_EQ(a.owner, b.owner) << "K = " << k;
  }
  // Seeds past 32 bits are folded into METIS's int seed, not refused.
  expect_covers(partition_metis(g, train, 4, (std::uint64_t{1} << 40) | 1), g.num_rows(), 4);
}

TEST(MetisPartition, RefusesGraphsPastThe32BitLimits) {
  EXPECT_NO_THROW(check_metis_limits(2147483647, 2147483647));
  expect_error(ErrorCategory::InvalidInput, "edges exceed 2^31-1",
               [] { check_metis_limits(1000, std::int64_t{1} << 31); });
  expect_error(ErrorCategory::InvalidInput, "32-bit indices",
               [] { check_metis_limits(1000, std::int64_t{120} << 30); });
  expect_error(ErrorCategory::InvalidInput, "nodes exceed 2^31-1",
               [] { check_metis_limits(std::int64_t{1} << 31, 10); });
}

TEST(MetisPartition, RefusesBadInputs) {
  Csr g = grid(4);
  expect_error(ErrorCategory::InvalidArgument, "out of range",
               [&] { partition_metis(g, std::vector<GlobalId>{16}, 2, 1); });
  expect_error(ErrorCategory::InvalidArgument, "out of range",
               [&] { partition_metis(g, std::vector<GlobalId>{-1}, 2, 1); });
  Csr rect(2, 3, {0, 1, 2}, {2, 0});
  expect_error(ErrorCategory::InvalidArgument, "square",
               [&] { partition_metis(rect, {}, 2, 1); });
}

}  // namespace
}  // namespace tessera
