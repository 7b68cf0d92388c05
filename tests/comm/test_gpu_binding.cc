// SPDX-License-Identifier: Apache-2.0
// The GPU binding rules (comm/gpu_binding.h) without a GPU, under mpiexec at 1, 2 and 4 ranks:
// simulated Slurm launches (SLURM_PROCID, SLURM_LOCALID, ... injected into detect_launch_env)
// and simulated device counts and physical GPUs. --device cuda binds local rank modulo the
// visible devices, so one GPU per task (every task's device 0) and all GPUs visible (local rank
// i on device i) both give every rank a GPU of its own; --device cuda:i is honoured or refused
// naming what the rank sees; two ranks on one physical GPU are refused on every rank, naming
// both ranks, the GPU and the way out.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "comm/agreement.h"
#include "comm/gpu_binding.h"
#include "comm/launch_env.h"
#include "comm/mpi_communicator.h"
#include "core/error.h"

namespace tessera {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RequestedGpu, CudaIsAutomaticAndCudaIIsIndexI) {
  EXPECT_EQ(requested_gpu("cuda"), -1);
  EXPECT_EQ(requested_gpu("cuda:0"), 0);
  EXPECT_EQ(requested_gpu("cuda:7"), 7);
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "gpu", "cpu", "cuda:12345"}) {
    try {
      requested_gpu(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << bad;
      EXPECT_TRUE(contains(e.message(), std::string("--device ") + bad)) << e.message();
    }
  }
}

TEST(ChooseGpu, LocalRankModuloTheVisibleDevices) {
  // One GPU per task (srun --gpus-per-task=1 --gpu-bind=single:1): each task sees one device.
  for (int local = 0; local < 4; ++local) EXPECT_EQ(choose_gpu(-1, local, 1, "3"), 0);
  // All four GPUs visible to every task.
  for (int local = 0; local < 4; ++local) EXPECT_EQ(choose_gpu(-1, local, 4, nullptr), local);
  // Eight ranks over four GPUs: two per GPU (NCCL then refuses them, see below).
  EXPECT_EQ(choose_gpu(-1, 6, 4, nullptr), 2);
  // cuda:i is honoured on every rank.
  EXPECT_EQ(choose_gpu(1, 0, 2, "0,1"), 1);
  EXPECT_EQ(choose_gpu(1, 3, 2, "0,1"), 1);
}

TEST(ChooseGpu, RefusesWhatTheRankDoesNotSee) {
  try {
    choose_gpu(2, 0, 1, "5");
    ADD_FAILURE() << "cuda:2 accepted with one visible GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
    for (const char* part : {"--device cuda:2", "sees 1 GPU", "CUDA_VISIBLE_DEVICES=5",
                             "cuda:0", "--device cuda"})
      EXPECT_TRUE(contains(e.message(), part)) << part << " in: " << e.message();
  }
  try {
    choose_gpu(-1, 0, 0, "");
    ADD_FAILURE() << "no visible GPU accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Cuda);
    EXPECT_TRUE(contains(e.message(), "no CUDA GPU is visible")) << e.message();
    EXPECT_TRUE(contains(e.message(), "--device cpu")) << e.message();
  }
}

TEST(FirstSharedGpu, FindsTheFirstPairInRankOrder) {
  EXPECT_FALSE(first_shared_gpu(std::vector<std::string>{"a", "b", "c"}).has_value());
  const auto pair = first_shared_gpu(std::vector<std::string>{"a", "b", "c", "b", "a"});
  ASSERT_TRUE(pair.has_value());
  EXPECT_EQ(*pair, std::make_pair(1, 3)) << "rank 3 meets rank 1's GPU before rank 4 meets 0's";
}

TEST(RanksOnGpu, CountsTheRanksWithThisRanksIdentity) {
  const std::vector<std::string> four_on_two{"GPU-a", "GPU-b", "GPU-a", "GPU-a"};
  EXPECT_EQ(ranks_on_gpu(four_on_two, 0), 3) << "ranks 0, 2 and 3 share GPU-a";
  EXPECT_EQ(ranks_on_gpu(four_on_two, 1), 1);
  EXPECT_EQ(ranks_on_gpu(std::vector<std::string>{"GPU-a"}, 0), 1);
}

// ---------------------------------------------------------------------------------------------
// Simulated launches across the ranks of this job.

class GpuBinding : public ::testing::Test {
 protected:
  // The Slurm variables of an srun step of this job's ranks, `per_node` tasks per node.
  EnvLookup slurm(int per_node) {
    env_ = {{"SLURM_JOB_ID", "4242"},
            {"SLURM_PROCID", std::to_string(comm.rank())},
            {"SLURM_NTASKS", std::to_string(comm.size())},
            {"SLURM_STEP_NUM_TASKS", std::to_string(comm.size())},
            {"SLURM_LOCALID", std::to_string(comm.rank() % per_node)},
            {"SLURM_CPUS_PER_TASK", "8"}};
    return [this](const char* name) -> const char* {
      const auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
  }
  // This rank's place and GPU under srun with `per_node` tasks per node and `visible` devices
  // per task; the physical GPU is node n's GPU k ("node<n>-gpu<k>"), where with one visible
  // device per task the device is the task's own GPU.
  struct Bound {
    int local_rank, device;
    std::string identity;
  };
  Bound bind(int per_node, int visible, int requested) {
    // All ranks run on this one machine: MPI's local size is the job's size.
    const LaunchEnv env = detect_launch_env(comm, comm.rank(), comm.size(), slurm(per_node));
    Bound b{env.local_rank, choose_gpu(requested, env.local_rank, visible, nullptr), ""};
    const int physical = visible == 1 ? env.local_rank : b.device;
    b.identity = "node" + std::to_string(comm.rank() / per_node) + "-gpu" + std::to_string(physical);
    return b;
  }
  // The AgreedError of require_one_gpu_per_rank, or "" when it passed.
  std::string refusal(const std::string& identity, const std::string& device) {
    try {
      require_one_gpu_per_rank(comm, identity, device);
    } catch (const AgreedError& e) {
      return e.message();
    }
    return "";
  }

  MpiCommunicator comm{MPI_COMM_WORLD, 60.0};
  std::map<std::string, std::string> env_;
};

TEST_F(GpuBinding, OneGpuPerTaskGivesEveryRankItsOwnGpu) {
  // 2 tasks per node, each seeing only its own GPU (--gpus-per-task=1 --gpu-bind=single:1).
  const Bound b = bind(2, 1, -1);
  EXPECT_EQ(b.local_rank, comm.rank() % 2) << "SLURM_LOCALID";
  EXPECT_EQ(b.device, 0);
  EXPECT_EQ(refusal(b.identity, "cuda"), "");
}

TEST_F(GpuBinding, AllGpusVisibleBindsLocalRankI) {
  // 2 tasks per node, both GPUs of the node visible to both (--gpus-per-node=2).
  const Bound b = bind(2, 2, -1);
  EXPECT_EQ(b.device, comm.rank() % 2);
  EXPECT_EQ(refusal(b.identity, "cuda"), "");
}

TEST_F(GpuBinding, TwoRanksOnOneGpuAreRefusedOnEveryRank) {
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks on one node";
  // Every rank on one node with one GPU visible to all: everyone binds device 0, the same GPU.
  EXPECT_EQ(choose_gpu(-1, comm.rank(), 1, "0"), 0);
  const std::string shared = refusal("node0-gpu0", "cuda");
  for (const char* part :
       {"ranks 0 and 1", "node0-gpu0", "one GPU per rank", "--gpus-per-task=1", "--gpu-comm mpi"})
    EXPECT_TRUE(contains(shared, part)) << part << " in: " << shared;
  // --device cuda:1 with two GPUs visible to every task of a node puts them all on GPU 1.
  const Bound one = bind(comm.size(), 2, 1);
  EXPECT_EQ(one.device, 1);
  const std::string message = refusal(one.identity, "cuda:1");
  for (const char* part :
       {"ranks 0 and 1", "node0-gpu1", "--device cuda:1", "--device cuda", "--gpu-comm mpi"})
    EXPECT_TRUE(contains(message, part)) << part << " in: " << message;
}

TEST_F(GpuBinding, SlurmVariablesThatContradictMpiAreRefused) {
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  EnvLookup lookup = slurm(comm.size());
  env_["SLURM_PROCID"] = std::to_string((comm.rank() + 1) % comm.size());  // not the MPI rank
  try {
    detect_launch_env(comm, comm.rank(), comm.size(), lookup);
    ADD_FAILURE() << "a SLURM_PROCID other than the MPI rank was accepted";
  } catch (const AgreedError& e) {
    EXPECT_TRUE(contains(e.message(), "SLURM_PROCID")) << e.message();
  }
}

}  // namespace
}  // namespace tessera
