// SPDX-License-Identifier: Apache-2.0
// Parts built from slices of an HDF5 dataset (sliced_block_part: every rank reads only its rows;
// planned_part_from_slice: the rows then go to their owners under any plan) against
// PartBuilder's parts of the same plan cut from the whole dataset in memory: equal field for
// field, at 1, 2 and 4 ranks, multi-class and multi-label; and they train alike.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "comm/mpi_communicator.h"
#include "datasets/loaders.h"
#include "datasets/synthetic.h"
#include "engine/sliced_part.h"
#include "engine/trainer.h"
#include "partition/graph_part.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

Dataset small_dataset(bool multilabel) {
  SyntheticConfig c = synthetic_preset("default");
  c.num_nodes = 700;
  c.num_edges = 3000;
  c.num_features = 9;
  Dataset d = generate_synthetic(c);
  // A directed graph (the generator's is symmetric): keep u -> v for u < v, and the reverse
  // only for every third pair, so that most of the training graph's entries come from the
  // rank that owns the other end.
  std::vector<EdgeOffset> indptr = {0};
  std::vector<NodeId> indices;
  for (std::int64_t v = 0; v < d.num_nodes(); ++v) {
    for (EdgeOffset e = d.graph.indptr()[v]; e < d.graph.indptr()[v + 1]; ++e) {
      const NodeId u = d.graph.indices()[e];
      if (u < v || (u + v) % 3 == 0) indices.push_back(u);
    }
    indptr.push_back(static_cast<EdgeOffset>(indices.size()));
  }
  d.graph = Csr(d.num_nodes(), d.num_nodes(), std::move(indptr), std::move(indices));
  if (multilabel) {
    d.task = TaskType::MultiLabel;
    d.eval_metric = "rocauc";
    d.num_tasks = 3;
    d.targets = Tensor(d.num_nodes(), 3);
    for (std::int64_t i = 0; i < d.targets.numel(); ++i)
      d.targets.f32()[i] =
          i % 13 == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>((i / 3) % 2);
    d.labels.clear();
  }
  return d;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.same_shape(b) && (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

void expect_same_part(const GraphPart& got, const GraphPart& want) {
  EXPECT_EQ(got.dataset.name, want.dataset.name);
  EXPECT_EQ(got.dataset.task, want.dataset.task);
  EXPECT_EQ(got.dataset.num_nodes, want.dataset.num_nodes);
  EXPECT_EQ(got.dataset.num_edges, want.dataset.num_edges);
  EXPECT_EQ(got.dataset.num_features, want.dataset.num_features);
  EXPECT_EQ(got.dataset.num_outputs(), want.dataset.num_outputs());
  EXPECT_EQ(got.dataset.fingerprint, want.dataset.fingerprint);
  const LocalGraph &a = got.graph, &b = want.graph;
  EXPECT_EQ(a.part, b.part);
  EXPECT_EQ(a.num_parts, b.num_parts);
  EXPECT_EQ(a.plan_fingerprint, b.plan_fingerprint);
  EXPECT_EQ(a.owned_ids, b.owned_ids);
  EXPECT_EQ(a.halo_ids, b.halo_ids);
  EXPECT_EQ(a.adjacency.num_cols(), b.adjacency.num_cols());
  EXPECT_EQ(a.adjacency.indptr(), b.adjacency.indptr());
  EXPECT_EQ(a.adjacency.indices(), b.adjacency.indices());
  EXPECT_EQ(a.degrees, b.degrees);
  EXPECT_EQ(a.halo.send_offsets, b.halo.send_offsets);
  EXPECT_EQ(a.halo.send_rows, b.halo.send_rows);
  EXPECT_EQ(a.halo.recv_offsets, b.halo.recv_offsets);
  EXPECT_TRUE(same_bits(got.features, want.features));
  EXPECT_EQ(got.labels, want.labels);
  EXPECT_TRUE(same_bits(got.targets, want.targets));
  EXPECT_EQ(got.train_rows, want.train_rows);
  EXPECT_EQ(got.valid_rows, want.valid_rows);
  EXPECT_EQ(got.test_rows, want.test_rows);
}

class SlicedPart : public ::testing::Test {
 protected:
  // Rank 0 writes `d` as HDF5 to a path every rank then reads.
  fs::path written(const Dataset& d, const std::string& name) {
    std::int64_t pid = comm.rank() == 0 ? static_cast<std::int64_t>(getpid()) : 0;
    std::vector<std::int64_t> shared = {pid};
    comm.all_reduce_max(shared);
    const fs::path file =
        fs::temp_directory_path() / ("tessera_sliced_" + std::to_string(shared[0]) + name + ".h5");
    if (comm.rank() == 0) write_hdf5(d, file);
    comm.barrier();
    return file;
  }
  void remove(const fs::path& file) {
    comm.barrier();
    if (comm.rank() == 0) fs::remove(file);
  }

  MpiCommunicator comm{MPI_COMM_WORLD, 120.0};
};

// Under the block plan (each rank owns the rows it read) and under a random one (whose parts
// interleave across every slice, so that the rows go to their owners), the parts equal
// PartBuilder's of that plan, and so do their gathered statistics.
TEST_F(SlicedPart, EqualsThePartOfTheSamePlanCutFromTheWholeDataset) {
  for (const bool block : {true, false}) {
    for (const bool multilabel : {false, true}) {
      SCOPED_TRACE(std::string(block ? "block plan, " : "random plan, ") +
                   (multilabel ? "multi-label" : "multi-class"));
      const Dataset d = small_dataset(multilabel);
      const fs::path file =
          written(d, std::string(block ? "_b" : "_p") + (multilabel ? "ml" : "mc"));
      const PartitionPlan plan = block ? partition_block(d.num_nodes(), comm.size())
                                       : partition_random(d.num_nodes(), comm.size(), 7);
      const GraphPart sliced =
          block ? sliced_block_part(file, comm)
                : planned_part_from_slice(read_block_slice(file, comm.rank(), comm.size()), plan,
                                          comm);
      validate(sliced, "sliced part");
      const Csr graph = training_graph(d);
      const GraphPart whole = PartBuilder(d, graph, plan, dataset_info(d)).build(comm.rank());
      expect_same_part(sliced, whole);
      const PartitionStats got = gathered_stats(sliced, comm);
      const PartitionStats want = partition_stats(graph, plan, d.train_idx);
      EXPECT_EQ(got.edge_cut, want.edge_cut);
      EXPECT_EQ(got.owned_nodes, want.owned_nodes);
      EXPECT_EQ(got.halo_nodes, want.halo_nodes);
      EXPECT_EQ(got.train_nodes, want.train_nodes);
      EXPECT_DOUBLE_EQ(got.replication_factor, want.replication_factor);
      EXPECT_DOUBLE_EQ(got.node_imbalance, want.node_imbalance);
      EXPECT_DOUBLE_EQ(got.train_imbalance, want.train_imbalance);
      if (comm.size() > 1) {
        EXPECT_GT(sliced.graph.num_halo(), 0) << "the plan cut no edge";
      }
      remove(file);
    }
  }
}

// Trained on the sliced parts, K ranks give the losses of the parts PartBuilder cuts.
TEST_F(SlicedPart, TrainsAsThePartsCutInMemory) {
  const Dataset d = small_dataset(false);
  const fs::path file = written(d, "_train");
  TrainConfig config;
  config.num_layers = 2;
  config.hidden_channels = 16;
  config.epochs = 5;
  const Csr graph = training_graph(d);
  for (const bool block : {true, false}) {
    SCOPED_TRACE(block ? "block plan" : "random plan");
    const PartitionPlan plan = block ? partition_block(d.num_nodes(), comm.size())
                                     : partition_random(d.num_nodes(), comm.size(), 3);
    Trainer sliced(config,
                   block ? sliced_block_part(file, comm)
                         : planned_part_from_slice(read_block_slice(file, comm.rank(), comm.size()),
                                                   plan, comm),
                   comm);
    Trainer whole(config, PartBuilder(d, graph, plan, dataset_info(d)).build(comm.rank()), comm);
    std::vector<double> a, b;
    sliced.train_run(0, [&](const EpochRecord& r) { a.push_back(r.loss); });
    whole.train_run(0, [&](const EpochRecord& r) { b.push_back(r.loss); });
    EXPECT_EQ(a, b);
  }
  remove(file);
}

}  // namespace
}  // namespace tessera
