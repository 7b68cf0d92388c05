// SPDX-License-Identifier: Apache-2.0
// Block and random partitioners, method names and the statistics of a plan: hand-checked small
// graphs, and both halo-counting paths (bitmask for K <= 512, per part above) against std::set.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

// Path 0-1-2-3-4-5 stored symmetric (rows = destinations).
Csr path_graph(int n) {
  std::vector<GlobalId> src, dst;
  for (int v = 0; v + 1 < n; ++v) {
    src.push_back(v);
    dst.push_back(v + 1);
    src.push_back(v + 1);
    dst.push_back(v);
  }
  return Csr::from_edges(n, src, dst);
}

TEST(PartitionPlan, BlockIsContiguousAndBalanced) {
  PartitionPlan plan = partition_block(10, 3);
  EXPECT_EQ(plan.num_parts, 3);
  std::vector<std::int32_t> expected{0, 0, 0, 1, 1, 1, 2, 2, 2, 2};
  EXPECT_EQ(plan.owner, expected);
}

// The owner of every node and the first node of every part, as ranks that read their block of a
// file compute them: equal to partition_block's on small graphs, and exact at the ends of
// every part past 2^32 nodes and offsets, where p * N overflows 32 bits.
TEST(PartitionPlan, BlockBoundsWithoutTheOwners) {
  for (std::int64_t n = 1; n <= 40; ++n) {
    for (int k = 1; k <= n; ++k) {
      const PartitionPlan plan = partition_block(n, k);
      EXPECT_EQ(block_first(n, k, 0), 0);
      EXPECT_EQ(block_first(n, k, k), n);
      for (std::int64_t v = 0; v < n; ++v) {
        const int p = plan.owner[static_cast<std::size_t>(v)];
        ASSERT_EQ(block_part_of(n, k, v), p) << "node " << v << " of " << n << ", " << k;
        ASSERT_LE(block_first(n, k, p), v);
        ASSERT_GT(block_first(n, k, p + 1), v);
      }
    }
  }
  const std::int64_t n = (std::int64_t{1} << 33) + 12345;
  for (int k : {2, 3, 7, 1000, 65536}) {
    for (int p = 0; p < k; p += std::max(1, k / 16)) {
      const std::int64_t begin = block_first(n, k, p), end = block_first(n, k, p + 1);
      ASSERT_LE(begin * k, n * p);  // begin = floor(n p / k), in products below 2^51
      ASSERT_GT((begin + 1) * k, n * p);
      ASSERT_LT(begin, end);
      for (const std::int64_t v : {begin, begin + 1, end - 2, end - 1}) {
        ASSERT_EQ(block_part_of(n, k, v), p) << "node " << v << " of " << n << ", " << k;
      }
    }
  }
}

TEST(PartitionPlan, RefusesMorePartsThanNodesAndNoParts) {
  for (int k : {3, 4}) {
    try {
      partition_block(2, k);
      ADD_FAILURE() << "partition_block(2, " << k << ") did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
      EXPECT_NE(e.message().find("more parts (" + std::to_string(k) + ") than nodes (2)"),
                std::string::npos)
          << e.message();
    }
    EXPECT_THROW(partition_random(2, k, 1), Error);
  }
  EXPECT_THROW(partition_random(5, 0, 1), Error);
  EXPECT_THROW(partition_block(5, -1), Error);
  EXPECT_EQ(partition_block(2, 2).owner, (std::vector<std::int32_t>{0, 1}));
}

TEST(PartitionPlan, StatsOfPathSplitInTwo) {
  Csr g = path_graph(6);
  PartitionPlan plan = partition_block(6, 2);  // {0,1,2} | {3,4,5}
  std::vector<GlobalId> train{0, 1, 5};
  PartitionStats stats = partition_stats(g, plan, train);
  EXPECT_EQ(stats.edge_cut, 2);  // 2->3 and 3->2
  EXPECT_EQ(stats.halo_nodes, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(stats.halo_nodes_total, 2);
  EXPECT_EQ(stats.owned_nodes, (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(stats.seconds, 0.0);  // callers time the partitioner themselves
  EXPECT_EQ(stats.train_nodes, (std::vector<std::int64_t>{2, 1}));
  EXPECT_DOUBLE_EQ(stats.replication_factor, 8.0 / 6.0);
  EXPECT_DOUBLE_EQ(stats.node_imbalance, 1.0);
  EXPECT_DOUBLE_EQ(stats.train_imbalance, 2.0 * 2 / 3);
}

TEST(PartitionPlan, RandomIsDeterministicAndRoughlyBalanced) {
  PartitionPlan a = partition_random(10000, 4, 7), b = partition_random(10000, 4, 7);
  EXPECT_EQ(a.owner, b.owner);
  PartitionPlan c = partition_random(10000, 4, 8);
  EXPECT_NE(a.owner, c.owner);
  std::vector<int> count(4, 0);
  for (std::int32_t p : a.owner) {
    ASSERT_GE(p, 0);
    ASSERT_LT(p, 4);
    ++count[p];
  }
  // 2500 expected per part, std ~43: 6 std is a safe bound.
  for (int n : count) EXPECT_NEAR(n, 2500, 260);
}

TEST(PartitionPlan, RejectsBadArguments) {
  EXPECT_THROW(partition_block(10, 0), Error);
  EXPECT_THROW(parse_partition_method("metis2"), Error);
  PartitionPlan plan = partition_block(5, 2);
  EXPECT_THROW(partition_stats(path_graph(6), plan, {}), Error);
}

TEST(PartitionPlan, MethodNamesRoundTrip) {
  for (const char* name : {"metis", "random", "block"}) {
    EXPECT_EQ(to_string(parse_partition_method(name)), name);
  }
  EXPECT_EQ(parse_partition_method("metis"), PartitionMethod::Metis);
  EXPECT_EQ(parse_partition_method("random"), PartitionMethod::Random);
  EXPECT_EQ(parse_partition_method("block"), PartitionMethod::Block);
  try {
    parse_partition_method("METIS");
    ADD_FAILURE() << "parse_partition_method(\"METIS\") did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
    EXPECT_NE(e.message().find("metis, random or block"), std::string::npos) << e.message();
  }
}

// Directed edges, owners {0,0,1,1,2,2}: node 0 is a halo node of two parts, 2->2 is a self loop.
TEST(PartitionPlan, StatsOfDirectedGraphWithSharedHaloNode) {
  std::vector<GlobalId> src{0, 1, 0, 4, 2, 3, 2, 0, 0, 4, 2};
  std::vector<GlobalId> dst{2, 2, 3, 0, 4, 5, 5, 5, 1, 5, 2};
  Csr g = Csr::from_edges(6, src, dst);
  PartitionPlan plan{3, {0, 0, 1, 1, 2, 2}};
  std::vector<GlobalId> train{1, 4, 5, 5};  // repeats count once per entry
  PartitionStats stats = partition_stats(g, plan, train);
  // Rows of part 1 read {0, 1} (3 entries), part 0 reads {4}, part 2 reads {0, 2, 3} (4 entries).
  EXPECT_EQ(stats.edge_cut, 8);
  EXPECT_EQ(stats.halo_nodes, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(stats.halo_nodes_total, 6);
  EXPECT_EQ(stats.owned_nodes, (std::vector<std::int64_t>{2, 2, 2}));
  EXPECT_EQ(stats.train_nodes, (std::vector<std::int64_t>{1, 0, 3}));
  EXPECT_DOUBLE_EQ(stats.replication_factor, 2.0);
  EXPECT_DOUBLE_EQ(stats.node_imbalance, 1.0);
  EXPECT_DOUBLE_EQ(stats.train_imbalance, 3.0 * 3 / 4);
}

// Reference: one std::set of foreign in-neighbours per part.
void expect_stats_match_sets(const Csr& g, const PartitionPlan& plan) {
  std::vector<std::set<NodeId>> halo(plan.num_parts);
  std::int64_t cut = 0;
  for (std::int64_t v = 0; v < g.num_rows(); ++v) {
    for (EdgeOffset e = g.indptr()[v]; e < g.indptr()[v + 1]; ++e) {
      NodeId u = g.indices()[e];
      if (plan.owner[u] == plan.owner[v]) continue;
      ++cut;
      halo[plan.owner[v]].insert(u);
    }
  }
  PartitionStats stats = partition_stats(g, plan, {});
  EXPECT_EQ(stats.edge_cut, cut);
  ASSERT_EQ(stats.halo_nodes.size(), halo.size());
  std::int64_t total = 0;
  for (int p = 0; p < plan.num_parts; ++p) {
    EXPECT_EQ(stats.halo_nodes[p], static_cast<std::int64_t>(halo[p].size())) << "part " << p;
    total += static_cast<std::int64_t>(halo[p].size());
  }
  EXPECT_EQ(stats.halo_nodes_total, total);
}

TEST(PartitionPlan, HaloCountsMatchSetsOnBothPaths) {
  // 3000 nodes, 30000 random directed edges (repeats merged by from_edges).
  const std::int64_t n = 3000;
  CounterRng rng(11, 0, 0, RngPurpose::Init);
  std::vector<GlobalId> src, dst;
  for (std::uint64_t e = 0; e < 30000; ++e) {
    auto w = rng.words(e, 0);
    src.push_back(static_cast<GlobalId>(w[0] % n));
    dst.push_back(static_cast<GlobalId>(w[1] % n));
  }
  Csr g = Csr::from_edges(n, src, dst);
  // 1..512 use the (N, W) bitmask with W = 1, 2, 8 words; 513 and 1500 count part by part.
  for (int k : {1, 3, 64, 65, 512, 513, 1500}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    expect_stats_match_sets(g, partition_random(n, k, 5));
  }
}

TEST(PartitionPlan, StatsRejectOwnersOutOfRange) {
  Csr g = path_graph(4);
  EXPECT_THROW(partition_stats(g, PartitionPlan{2, {0, 1, 2, 0}}, {}), Error);
  EXPECT_THROW(partition_stats(g, PartitionPlan{2, {0, -1, 1, 0}}, {}), Error);
  EXPECT_THROW(partition_stats(g, PartitionPlan{2, {0, 1, 1, 0}}, std::vector<GlobalId>{4}),
               Error);
}

}  // namespace
}  // namespace tessera
