// SPDX-License-Identifier: Apache-2.0
// train_gcn on GPU ranks as a user launches it (mpiexec): two ranks sharing one GPU with
// --gpu-comm mpi train to the end and say so in the summary; under NCCL (two GPUs or more) a
// rank that never joins the NCCL communicator (TESSERA_STALL) makes the other give up within
// --comm-timeout, and the job ends; graph mode refuses a part above the GPU's --memory-budget.
// Skipped, with the reason, without the GPUs. The binaries are the build's, or TESSERA_TRAIN_GCN
// and TESSERA_MPIEXEC (the GPU check's pack).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "core/cuda/runtime.h"
#include "tests/apps/cli_test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

fs::path work_dir() { return cli_test::work_dir("tessera_cuda_cli"); }

std::string from_env(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string train_gcn(int ranks, const std::string& args) {
  return from_env("TESSERA_MPIEXEC", MPIEXEC_PATH) + " -n " + std::to_string(ranks) + " " +
         from_env("TESSERA_TRAIN_GCN", TRAIN_GCN_PATH) + " " + args;
}

TEST(CudaCli, TwoRanksShareOneGpuOverMpi) {
  if (!cuda::cuda_available()) GTEST_SKIP() << "no usable CUDA GPU: " << cuda::unavailable_reason();
  const fs::path summary = work_dir() / "shared.json";
  const cli_test::Result r = cli_test::run(
      train_gcn(2,
                "--device cuda:0 --gpu-comm mpi --codec int8 --epochs 3 --num-layers 2 "
                "--hidden-channels 16 --quiet --summary " +
                    summary.string()),
      work_dir() / "shared.log");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json s = nlohmann::json::parse(cli_test::read_text(summary));
  EXPECT_EQ(s.at("gpu_comm"), "mpi");
  EXPECT_EQ(s.at("ranks"), 2);
  EXPECT_TRUE(std::isfinite(s.at("final_loss").get<double>()));
}

TEST(CudaCli, ARankThatNeverJoinsNcclEndsTheJobAtTheTimeout) {
  if (!cuda::cuda_available()) GTEST_SKIP() << "no usable CUDA GPU: " << cuda::unavailable_reason();
  if (cuda::device_count() < 2)
    GTEST_SKIP() << "NCCL needs a GPU per rank: 2 ranks, " << cuda::device_count() << " GPU";
  const cli_test::Result r =
      cli_test::run(train_gcn(2, "--device cuda --epochs 2 --comm-timeout 3 --quiet"),
                    work_dir() / "stalled.log", "TESSERA_STALL='1:creating the NCCL communicator'");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.seconds, 60.0) << r.output;
  EXPECT_NE(r.output.find("did not complete within 3 s"), std::string::npos) << r.output;
}

// Graph mode checks a GPU rank's part against its GPU's share of --memory-budget, as a CPU rank's
// against the node's: a budget below the estimate ends the job before training, naming the GPU,
// and leaves no output file.
TEST(CudaCli, GraphModeRefusesAPartAboveTheGpuBudget) {
  if (!cuda::cuda_available()) GTEST_SKIP() << "no usable CUDA GPU: " << cuda::unavailable_reason();
  const fs::path summary = work_dir() / "refused.json";
  fs::remove(summary);
  const cli_test::Result r = cli_test::run(
      train_gcn(1, "--device cuda:0 --memory-budget 0.0001 --epochs 2 --quiet --summary " +
                       summary.string()),
      work_dir() / "refused.log");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("needs an estimated"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("one rank may use on cuda:0"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(summary));
}

}  // namespace
}  // namespace tessera
