// HaloExchange under mpiexec: forward delivers exactly the owners' rows into every halo block,
// backward adds exactly what every peer sent into the owners' rows, traffic is counted per
// category, and an empty plan sends nothing. Inputs are small integers, so every check is exact.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "comm/halo_exchange.h"
#include "comm/mpi_communicator.h"
#include "datasets/synthetic.h"
#include "partition/graph_part.h"

namespace tessera {
namespace {

constexpr std::int64_t kWidth = 7;  // odd width on purpose

float forward_value(GlobalId v, std::int64_t f) { return static_cast<float>(v * 10 + f); }
float backward_value(GlobalId v, int from_rank, std::int64_t f) {
  return static_cast<float>((v % 97) + 1000 * from_rank + f);
}

class HaloExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticConfig c;
    c.num_nodes = 600;
    c.num_edges = 2400;
    c.num_features = 4;
    c.num_classes = 3;
    c.seed = 11;
    dataset = generate_synthetic(c);
    graph = training_graph(dataset);
    plan = make_partition(PartitionMethod::Random, graph, dataset.train_idx, comm.size(), 5);
    info = dataset_info(dataset);
    PartBuilder builder(dataset, graph, plan, info);
    for (int p = 0; p < comm.size(); ++p) parts.push_back(builder.build(p));
  }
  const GraphPart& mine() const { return parts[static_cast<std::size_t>(comm.rank())]; }

  MpiCommunicator comm{MPI_COMM_WORLD, 60.0};
  Dataset dataset;
  Csr graph;
  PartitionPlan plan;
  DatasetInfo info;
  std::vector<GraphPart> parts;  // every part (the graph is small): expectations need them all
};

TEST_F(HaloExchangeTest, ForwardFillsHaloBlocksWithOwnersRows) {
  const LocalGraph& g = mine().graph;
  Tensor x(g.num_owned(), kWidth);
  for (std::int64_t i = 0; i < g.num_owned(); ++i)
    for (std::int64_t f = 0; f < kWidth; ++f) x.row<float>(i)[f] = forward_value(g.owned_ids[i], f);
  HaloExchange exchange(comm, g.halo);
  Tensor halo;
  exchange.start_forward(x, halo, /*layer=*/2);
  exchange.finish_forward();
  ASSERT_EQ(halo.rows(), g.num_halo());
  std::int64_t wrong = 0;
  for (std::int64_t j = 0; j < g.num_halo(); ++j)
    for (std::int64_t f = 0; f < kWidth; ++f)
      wrong += halo.row<float>(j)[f] != forward_value(g.halo_ids[j], f);
  EXPECT_EQ(wrong, 0) << "rank " << comm.rank();
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::HaloForward),
            static_cast<std::uint64_t>(g.halo.num_send() * kWidth * 4));
  // Forward has no unpacking: what was exposed lies inside the exchange's lifetime.
  EXPECT_LE(exchange.times().exposed_s, exchange.times().comm_s + 1e-9);
}

TEST_F(HaloExchangeTest, BackwardAddsEveryPeersGradientIntoTheOwner) {
  const LocalGraph& g = mine().graph;
  Tensor d_halo(g.num_halo(), kWidth);
  for (std::int64_t j = 0; j < g.num_halo(); ++j)
    for (std::int64_t f = 0; f < kWidth; ++f)
      d_halo.row<float>(j)[f] = backward_value(g.halo_ids[j], comm.rank(), f);
  Tensor d_x(g.num_owned(), kWidth);
  for (std::int64_t i = 0; i < d_x.numel(); ++i) d_x.f32()[i] = 0.5f;
  HaloExchange exchange(comm, g.halo);
  exchange.start_backward(d_halo, /*layer=*/1);
  exchange.finish_backward(d_x);

  // Expected: 0.5 plus, for every other part holding v as a halo node, that part's value.
  std::map<GlobalId, std::vector<float>> expected;
  for (GlobalId v : g.owned_ids) expected[v] = std::vector<float>(kWidth, 0.5f);
  for (const GraphPart& other : parts) {
    for (GlobalId v : other.graph.halo_ids) {
      auto it = expected.find(v);
      if (it == expected.end()) continue;
      for (std::int64_t f = 0; f < kWidth; ++f) it->second[f] += backward_value(v, other.graph.part, f);
    }
  }
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < g.num_owned(); ++i)
    for (std::int64_t f = 0; f < kWidth; ++f)
      wrong += d_x.row<float>(i)[f] != expected[g.owned_ids[i]][f];
  EXPECT_EQ(wrong, 0) << "rank " << comm.rank();
  EXPECT_EQ(comm.traffic().sent(TrafficCategory::HaloBackward),
            static_cast<std::uint64_t>(g.num_halo() * kWidth * 4));
}

TEST_F(HaloExchangeTest, RepeatedExchangesOfSeveralLayersStayExact) {
  const LocalGraph& g = mine().graph;
  HaloExchange exchange(comm, g.halo);
  for (int layer = 0; layer < 3; ++layer) {
    const std::int64_t width = 1 + 16 * layer;  // 1, 17, 33
    Tensor x(g.num_owned(), width), halo;
    for (std::int64_t i = 0; i < g.num_owned(); ++i)
      for (std::int64_t f = 0; f < width; ++f)
        x.row<float>(i)[f] = forward_value(g.owned_ids[i], f) + layer;
    exchange.start_forward(x, halo, layer);
    while (!exchange.poll()) {
    }
    exchange.finish_forward();
    std::int64_t wrong = 0;
    for (std::int64_t j = 0; j < g.num_halo(); ++j)
      for (std::int64_t f = 0; f < width; ++f)
        wrong += halo.row<float>(j)[f] != forward_value(g.halo_ids[j], f) + layer;
    EXPECT_EQ(wrong, 0) << "layer " << layer << " rank " << comm.rank();
  }
}

TEST(HaloPlan, ValidateRefusesBrokenPlans) {
  HaloPlan plan;
  plan.send_offsets = {0, 0, 2};
  plan.send_rows = {0, 1};
  plan.recv_offsets = {0, 0, 3};
  EXPECT_NO_THROW(plan.validate(2, 0, "plan"));
  EXPECT_THROW(plan.validate(1, 0, "plan"), Error);  // row 1 not owned
  EXPECT_THROW(plan.validate(2, 1, "plan"), Error);  // part 1 would send to itself
  plan.recv_offsets = {0, 2, 1};
  EXPECT_THROW(plan.validate(2, 0, "plan"), Error);  // decreasing offsets
}

}  // namespace
}  // namespace tessera
