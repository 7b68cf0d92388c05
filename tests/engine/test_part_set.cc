// SPDX-License-Identifier: Apache-2.0
// The collective cross-check of a job's parts (check_part_set, under mpiexec at 2 and 4 ranks):
// the parts of one partitioning pass; a part of another partitioning of the same dataset and K,
// two ranks holding the same part, and a halo plan whose sender lists other nodes than its
// receiver expects are each refused on every rank with a message that says what disagrees.
#include <gtest/gtest.h>

#include <string>

#include "comm/agreement.h"
#include "comm/mpi_communicator.h"
#include "datasets/synthetic.h"
#include "engine/part_loader.h"
#include "partition/graph_part.h"

namespace tessera {
namespace {

class PartSet : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticConfig c = synthetic_preset("default");
    c.num_nodes = 800;
    c.num_edges = 4000;
    dataset = generate_synthetic(c);
    graph = training_graph(dataset);
    info = dataset_info(dataset);
    metis = make_partition(PartitionMethod::Metis, graph, dataset.train_idx, comm.size(), 0);
    random = make_partition(PartitionMethod::Random, graph, dataset.train_idx, comm.size(), 1);
  }

  GraphPart part(const PartitionPlan& plan, int index) const {
    return PartBuilder(dataset, graph, plan, info).build(index);
  }

  // The agreed message, the same on every rank; empty when the check passed.
  std::string refusal(const GraphPart& mine) {
    try {
      check_part_set(comm, mine, "part-of-rank-" + std::to_string(comm.rank()));
    } catch (const AgreedError& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidInput) << e.what();
      return e.message();
    }
    return "";
  }

  MpiCommunicator comm{MPI_COMM_WORLD, 60.0};
  Dataset dataset;
  Csr graph;
  DatasetInfo info;
  PartitionPlan metis, random;
};

TEST_F(PartSet, PartsOfOnePartitioningPass) {
  EXPECT_EQ(refusal(part(metis, comm.rank())), "");
  EXPECT_EQ(refusal(part(random, comm.rank())), "");
}

TEST_F(PartSet, APartOfAnotherPartitioningIsNamed) {
  const int last = comm.size() - 1;
  const std::string m = refusal(part(comm.rank() == last ? random : metis, comm.rank()));
  EXPECT_NE(m.find("part-of-rank-" + std::to_string(last)), std::string::npos) << m;
  EXPECT_NE(m.find("from another partitioning than rank 0's part"), std::string::npos) << m;
}

TEST_F(PartSet, TwoRanksHoldingOnePartAreRefused) {
  // The same plan everywhere, but the last rank holds part 0 as rank 0 does.
  const int last = comm.size() - 1;
  const std::string m = refusal(part(metis, comm.rank() == last ? 0 : comm.rank()));
  EXPECT_NE(m.find("do not own the 800 nodes of the graph exactly once"), std::string::npos) << m;
}

TEST_F(PartSet, AHaloPlanThatSendsOtherNodesIsRefused) {
  GraphPart mine = part(metis, comm.rank());
  // Rank 0 sends a different owned row in the place of the first row of its first block.
  if (comm.rank() == 0) {
    std::vector<NodeId>& rows = mine.graph.halo.send_rows;
    ASSERT_FALSE(rows.empty()) << "the partition cuts no edge";
    rows[0] = rows[0] == 0 ? 1 : 0;
  }
  const std::string m = refusal(mine);
  EXPECT_NE(m.find("halo plans of the"), std::string::npos) << m;
  EXPECT_NE(m.find("what some rank sends is not what its peer expects"), std::string::npos) << m;
}

}  // namespace
}  // namespace tessera
