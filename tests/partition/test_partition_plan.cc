// Block and random partitioners and the statistics of a plan, on hand-checked graphs.
#include <gtest/gtest.h>

#include <vector>

#include "engine/core/error.h"
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

TEST(PartitionPlan, MorePartsThanNodesLeavesEmptyParts) {
  PartitionPlan plan = partition_block(2, 4);
  PartitionStats stats = partition_stats(path_graph(2), plan, {});
  std::int64_t owned = 0;
  for (std::int64_t c : stats.owned_nodes) owned += c;
  EXPECT_EQ(owned, 2);
  EXPECT_DOUBLE_EQ(stats.node_imbalance, 2.0);  // max 1 node vs mean 0.5
}

TEST(PartitionPlan, StatsOfPathSplitInTwo) {
  Csr g = path_graph(6);
  PartitionPlan plan = partition_block(6, 2);  // {0,1,2} | {3,4,5}
  std::vector<GlobalId> train{0, 1, 5};
  PartitionStats stats = partition_stats(g, plan, train);
  EXPECT_EQ(stats.edge_cut, 2);  // 2->3 and 3->2
  EXPECT_EQ(stats.halo_nodes, (std::vector<std::int64_t>{1, 1}));
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
  EXPECT_EQ(parse_partition_method("random"), PartitionMethod::Random);
  PartitionPlan plan = partition_block(5, 2);
  EXPECT_THROW(partition_stats(path_graph(6), plan, {}), Error);
}

}  // namespace
}  // namespace tessera
