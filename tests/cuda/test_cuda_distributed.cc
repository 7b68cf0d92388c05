// SPDX-License-Identifier: Apache-2.0
// GPU ranks against the CPU (under mpiexec at 2 and 4 ranks, once per --gpu-comm): graph-parallel
// training with --device cuda, halos moved between the GPUs while the inner rows aggregate,
// against the whole graph trained alone on the CPU; pipeline and hybrid stages on GPUs against
// the same layout on CPU ranks. Over NCCL every rank needs a GPU of its own
// (skipped, with the reason, otherwise); over MPI (GPU buffers staged through host memory) the
// ranks may share one GPU, so both run on a machine with a single GPU. The GPU kernels round
// differently from the CPU's and NCCL sums the gradients in its own order, so the per-epoch losses
// are compared to 2e-3 relative (as test_cuda_training); halo and gradient bytes must be counted in
// the job's traffic.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/cuda/runtime.h"
#include "datasets/loaders.h"
#include "datasets/synthetic.h"
#include "engine/trainer.h"
#include "partition/graph_part.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

// The parameter is --gpu-comm.
class CudaDistributed : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!cuda::cuda_available())
      GTEST_SKIP() << "no usable CUDA GPU: " << cuda::unavailable_reason();
    if (GetParam() == "nccl" && cuda::device_count() < comm.ranks_on_node())
      GTEST_SKIP() << comm.ranks_on_node() << " ranks on this node need as many GPUs under "
                   << "NCCL, found " << cuda::device_count();
  }
  MpiCommunicator comm{MPI_COMM_WORLD, 120.0};
};

std::vector<EpochRecord> train_records(Trainer& trainer) {
  std::vector<EpochRecord> records;
  trainer.train_run(0, [&](const EpochRecord& r) { records.push_back(r); });
  return records;
}

TEST_P(CudaDistributed, GpuRanksTrackTheSingleCpuRun) {
  SyntheticConfig s = synthetic_preset("default");
  s.num_nodes = 1200;
  s.num_edges = 6000;
  const Dataset dataset = generate_synthetic(s);
  for (const ModelKind model : {ModelKind::Gcn, ModelKind::Sage}) {
    SCOPED_TRACE(to_string(model));
    TrainConfig config;
    config.model = to_string(model);
    config.num_layers = 3;
    config.hidden_channels = 32;
    config.dropout = 0.5f;
    config.epochs = 5;
    config.seed = 1;
    Trainer single(config, dataset);
    const std::vector<EpochRecord> reference = train_records(single);

    config.device = "cuda";
    config.gpu_comm = GetParam();
    const Csr graph = training_graph(dataset);
    const PartitionPlan plan =
        make_partition(PartitionMethod::Metis, graph, dataset.train_idx, comm.size(), 3);
    Trainer gpu(config, PartBuilder(dataset, graph, plan, dataset_info(dataset)).build(comm.rank()),
                comm);
    const std::vector<EpochRecord> records = train_records(gpu);
    ASSERT_EQ(records.size(), reference.size());
    for (std::size_t e = 0; e < records.size(); ++e)
      EXPECT_NEAR(records[e].loss, reference[e].loss, 2e-3 * std::abs(reference[e].loss))
          << "epoch " << e + 1 << ", rank " << comm.rank();
    EXPECT_GT(records.back().bytes[static_cast<int>(TrafficCategory::HaloForward)], 0u);
    EXPECT_GT(records.back().bytes[static_cast<int>(TrafficCategory::HaloBackward)], 0u);
    EXPECT_GT(records.back().bytes[static_cast<int>(TrafficCategory::AllReduce)], 0u);
  }
}

// Encoded halos: the GPU ranks encode and decode on their GPUs (bit-identical codecs) what the
// CPU ranks encode on theirs, with error feedback's residuals kept on the GPU too, and the
// adaptive codec's blocks placed on their rows there (its ranges, measured by the same kernels,
// plan the same bits), so with the same parts and seed the losses agree as closely as the
// uncompressed runs do.
TEST_P(CudaDistributed, GpuRanksEncodeTheirHalosAsCpuRanksDo) {
  SyntheticConfig s = synthetic_preset("default");
  s.num_nodes = 1200;
  s.num_edges = 6000;
  const Dataset dataset = generate_synthetic(s);
  const Csr graph = training_graph(dataset);
  const PartitionPlan plan =
      make_partition(PartitionMethod::Metis, graph, dataset.train_idx, comm.size(), 3);
  const std::vector<std::pair<const char*, bool>> cases = {{"bf16", false},     {"int8", false},
                                                           {"int2", false},     {"int2", true},
                                                           {"adaptive", false}, {"adaptive", true}};
  for (const auto& [codec, feedback] : cases) {
    SCOPED_TRACE(std::string(codec) + (feedback ? " with error feedback" : ""));
    TrainConfig config;
    config.num_layers = 3;
    config.hidden_channels = 32;
    config.epochs = 5;
    config.seed = 2;
    config.codec = codec;
    config.error_feedback = feedback;
    Trainer cpu(config, PartBuilder(dataset, graph, plan, dataset_info(dataset)).build(comm.rank()),
                comm);
    const std::vector<EpochRecord> reference = train_records(cpu);
    config.device = "cuda";
    config.gpu_comm = GetParam();
    Trainer gpu(config, PartBuilder(dataset, graph, plan, dataset_info(dataset)).build(comm.rank()),
                comm);
    const std::vector<EpochRecord> records = train_records(gpu);
    ASSERT_EQ(records.size(), reference.size());
    for (std::size_t e = 0; e < records.size(); ++e) {
      EXPECT_NEAR(records[e].loss, reference[e].loss, 2e-3 * std::abs(reference[e].loss))
          << "epoch " << e + 1 << ", rank " << comm.rank();
      const int fwd = static_cast<int>(TrafficCategory::HaloForward);
      EXPECT_EQ(records[e].bytes[fwd], reference[e].bytes[fwd]) << "encoded bytes differ";
    }
  }
}

// Pipelined modes on GPU ranks: each stage's chunks, historical buffers and activations on its
// GPU, the streams between the stages (raw and encoded) and, in hybrid mode, the halo refresh
// between the parts moved by the GPU communicator; against the same layout on CPU ranks, to the
// same tolerance, with the same bytes (the traffic model's, which the CPU tests check).
TEST_P(CudaDistributed, GpuStagesTrainAsCpuStagesDo) {
  SyntheticConfig s = synthetic_preset("default");
  s.num_nodes = 1200;
  s.num_edges = 6000;
  const Dataset dataset = generate_synthetic(s);
  const Csr graph = training_graph(dataset);
  const int ranks = comm.size();
  struct Case {
    const char* parallel;
    int stages;
    const char* model;
    const char* codec;
  };
  for (const Case& c :
       {Case{"pipeline", ranks, "gcn", "none"}, Case{"pipeline", ranks, "gat", "int8"},
        Case{"pipeline", ranks, "gcnii", "bf16"}, Case{"hybrid", 2, "sage", "none"},
        Case{"hybrid", 2, "gcn", "int8"}}) {
    SCOPED_TRACE(std::string(c.parallel) + ", " + c.model + ", codec " + c.codec);
    TrainConfig config;
    config.parallel = c.parallel;
    config.stages = c.stages;
    config.model = c.model;
    config.codec = c.codec;
    config.num_layers = 4;
    config.hidden_channels = 32;
    config.epochs = 4;
    config.seed = 5;
    const int groups = std::string(c.parallel) == "pipeline" ? 1 : ranks / c.stages;
    PartitionPlan plan;
    if (groups == 1) {
      plan.owner.assign(static_cast<std::size_t>(dataset.num_nodes()), 0);
    } else {
      plan = make_partition(PartitionMethod::Metis, graph, dataset.train_idx, groups, 0);
    }
    const int part = comm.rank() / c.stages;
    Trainer cpu(config, PartBuilder(dataset, graph, plan, dataset_info(dataset)).build(part), comm);
    const std::vector<EpochRecord> reference = train_records(cpu);
    config.device = "cuda";
    config.gpu_comm = GetParam();
    Trainer gpu(config, PartBuilder(dataset, graph, plan, dataset_info(dataset)).build(part), comm);
    const std::vector<EpochRecord> records = train_records(gpu);
    ASSERT_EQ(records.size(), reference.size());
    for (std::size_t e = 0; e < records.size(); ++e) {
      EXPECT_NEAR(records[e].loss, reference[e].loss, 2e-3 * std::abs(reference[e].loss))
          << "epoch " << e + 1 << ", rank " << comm.rank();
      for (const TrafficCategory category :
           {TrafficCategory::Pipeline, TrafficCategory::HaloForward,
            TrafficCategory::HaloBackward}) {
        const int at = static_cast<int>(category);
        EXPECT_EQ(records[e].bytes[at], reference[e].bytes[at])
            << to_string(category) << " bytes, epoch " << e + 1;
      }
    }
    EXPECT_GT(records.back().bytes[static_cast<int>(TrafficCategory::Pipeline)], 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(GpuComm, CudaDistributed, ::testing::Values("nccl", "mpi"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param;
                         });

}  // namespace
}  // namespace tessera
