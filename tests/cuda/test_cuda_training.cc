// SPDX-License-Identifier: Apache-2.0
// GPU-resident training against the CPU (skipped, with the reason, when no GPU is usable): the
// same model, seed and data trained with --device cuda and --device cpu. The GPU kernels equal
// their CPU twins up to float rounding and the dropout masks are the same bits, so every epoch's
// loss must agree closely (5 epochs, each model family, both tasks' losses); and on Cora with
// Kipf & Welling's setup (200 epochs, seeds 0-2) the mean final test accuracy must be within 0.5
// points of the CPU's (skipped when ../shared/datasets is absent).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "datasets/loaders.h"
#include "core/cuda/runtime.h"
#include "engine/system.h"
#include "engine/trainer.h"
#include "tests/engine/kipf_welling.h"

namespace tessera {
namespace {

class CudaTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::cuda_available())
      GTEST_SKIP() << "no usable CUDA GPU: " << cuda::unavailable_reason();
  }
};

struct Trace {
  std::vector<double> losses;
  RunResult result;
  std::vector<float> params;
};

Trace train(TrainConfig config, const Dataset& dataset, const std::string& device, int run = 0) {
  config.device = device;
  Trainer trainer(config, dataset);
  Trace trace;
  trace.result = trainer.train_run(run, [&](const EpochRecord& r) {
    trace.losses.push_back(r.loss);
  });
  trace.params = trainer.model().host_params();
  return trace;
}

// Each epoch's loss and the final parameters of a GPU run against the CPU's. Float rounding
// differs (cuBLAS and cuSPARSE sum in other orders than the CPU kernels), and Adam amplifies it
// a little every step; 5 epochs keep the drift at the 1e-4 level, so 2e-3 relative (loss) and
// 2e-3 absolute + relative (parameters) would catch any wrong kernel, mask or index.
void expect_same_training(const TrainConfig& config, const Dataset& dataset, const char* what) {
  SCOPED_TRACE(what);
  const Trace cpu = train(config, dataset, "cpu");
  const Trace gpu = train(config, dataset, "cuda");
  ASSERT_EQ(cpu.losses.size(), gpu.losses.size());
  for (std::size_t e = 0; e < cpu.losses.size(); ++e) {
    EXPECT_NEAR(gpu.losses[e], cpu.losses[e], 2e-3 * std::abs(cpu.losses[e]))
        << "epoch " << e + 1;
  }
  ASSERT_EQ(cpu.params.size(), gpu.params.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < cpu.params.size(); ++i) {
    const double diff = std::abs(static_cast<double>(gpu.params[i]) - cpu.params[i]);
    worst = std::max(worst, diff / (2e-3 + 2e-3 * std::abs(cpu.params[i])));
  }
  EXPECT_LE(worst, 1.0) << "a parameter differs by more than 2e-3 (abs + rel)";
  std::printf("[ measured ] %s: loss epoch 1 cpu %.6f gpu %.6f, epoch %zu cpu %.6f gpu %.6f\n",
              what, cpu.losses.front(), gpu.losses.front(), cpu.losses.size(), cpu.losses.back(),
              gpu.losses.back());
}

TEST_F(CudaTraining, EveryModelFamilyTracksTheCpu) {
  TrainConfig base;
  base.dataset = "synth:default";
  base.epochs = 5;
  base.hidden_channels = 32;
  base.dropout = 0.5f;
  base.input_dropout = 0.1f;
  base.seed = 3;
  const Dataset dataset = load_dataset(base.dataset);

  struct Family {
    ModelKind model;
    int num_layers;
    bool batch_norm;
    const char* what;
  };
  for (const Family& family : {Family{ModelKind::Gcn, 3, false, "gcn, 3 layers"},
                               Family{ModelKind::Sage, 2, false, "sage, 2 layers"},
                               Family{ModelKind::ResGcn, 6, false, "resgcn, 6 layers"},
                               Family{ModelKind::Sage, 3, true, "sage + batch norm, 3 layers"},
                               Family{ModelKind::Gcnii, 6, false, "gcnii, 6 layers"},
                               Family{ModelKind::Gat, 3, false, "gat, 3 layers"}}) {
    TrainConfig config = base;
    config.model = to_string(family.model);
    config.heads = 4;  // gat: 4 heads (of a multiple of 4 wide) concatenated, 2 averaged at the end
    config.output_heads = 2;
    config.attention_dropout = 0.3f;
    config.num_layers = family.num_layers;
    config.batch_norm = family.batch_norm;
    expect_same_training(config, dataset, family.what);
  }
}

// One pipeline stage of several chunks on the GPU: the operator's chunk blocks, the historical
// buffers (fresh and stale rows), the chunks' features, labels and activations and the attention
// path's pushed gradients all live on the GPU, and track the same run on the CPU.
TEST_F(CudaTraining, PipelinedChunksTrackTheCpu) {
  TrainConfig base;
  base.dataset = "synth:default";
  base.parallel = "pipeline";
  base.chunks = 3;
  base.epochs = 5;
  base.hidden_channels = 32;
  base.dropout = 0.5f;
  base.seed = 4;
  const Dataset dataset = load_dataset(base.dataset);
  for (const auto& [model, layers] :
       {std::pair{ModelKind::Gcn, 3}, std::pair{ModelKind::Sage, 2}, std::pair{ModelKind::Gcnii, 4},
        std::pair{ModelKind::Gat, 2}}) {
    TrainConfig config = base;
    config.model = to_string(model);
    config.num_layers = layers;
    expect_same_training(config, dataset, ("pipeline of 3 chunks, " + config.model).c_str());
  }
}

TEST_F(CudaTraining, CoraMatchesTheCpuAccuracy) {
  const std::filesystem::path dir = std::filesystem::path(TESSERA_SHARED_DATASETS) / "cora";
  if (!std::filesystem::exists(dir / "raw" / "edge.csv.gz"))
    GTEST_SKIP() << "Cora not found at " << dir << " (the shared datasets folder is absent)";
  const Dataset cora = read_ogb_raw(dir);
  TrainConfig config = test::kipf_welling_config();
  config.dataset = dir.string();
  std::vector<double> cpu, gpu;
  for (int run = 0; run < 3; ++run) {
    cpu.push_back(train(config, cora, "cpu", run).result.final_test);
    gpu.push_back(train(config, cora, "cuda", run).result.final_test);
    std::printf("[ measured ] Cora seed %d: final test cpu %.4f gpu %.4f\n", run, cpu.back(),
                gpu.back());
  }
  std::printf("[ measured ] Cora mean final test: cpu %.4f gpu %.4f\n", mean(cpu), mean(gpu));
  EXPECT_NEAR(mean(gpu), mean(cpu), 0.005);
}

}  // namespace
}  // namespace tessera
