// SPDX-License-Identifier: Apache-2.0
// End to end on real data: GCN on Cora with Kipf & Welling's setup (2 layers, 16 hidden,
// dropout 0.5 on the input and the hidden layer, lr 0.01, weight decay 5e-4, 200 epochs,
// row-normalised features, public split) reaches test accuracy >= 0.80 at seed 0 and a mean
// >= 0.805 over seeds 0-4 (their paper: 81.5%); GCNII at 64 layers with Chen et al.'s set-up
// (below) and GAT with Velickovic et al.'s at one seed each. Skips when ../shared/datasets is
// absent.
#include <gtest/gtest.h>

#include <filesystem>

#include "datasets/loaders.h"
#include "engine/system.h"
#include "engine/trainer.h"
#include "tests/engine/kipf_welling.h"
#include "tests/shared_datasets.h"

namespace tessera {
namespace {

TEST(TrainCora, KipfWellingSetupReachesPublishedAccuracy) {
  const std::filesystem::path dir = std::filesystem::path(TESSERA_SHARED_DATASETS) / "cora";
  TESSERA_NEED_SHARED_DATASET(dir / "raw" / "edge.csv.gz");
  Dataset cora = read_ogb_raw(dir);
  TrainConfig config = test::kipf_welling_config();
  config.dataset = dir.string();
  Trainer trainer(config, cora);
  std::vector<double> final_test;
  for (int run = 0; run < 5; ++run) {
    RunResult r = trainer.train_run(run);
    std::printf("seed %llu: final test %.4f, test at best valid %.4f (epoch %d)\n",
                static_cast<unsigned long long>(r.seed), r.final_test, r.test_at_best_valid,
                r.best_epoch);
    final_test.push_back(r.final_test);
  }
  EXPECT_GE(final_test[0], 0.80);
  EXPECT_GE(mean(final_test), 0.805);
}

// GCNII with Chen et al.'s Cora set-up: 64 GCNII layers between the dense input and output
// layers (66 in all), 64 hidden, alpha 0.1, lambda 0.5, dropout 0.6 on every layer's input, lr
// 0.01, weight decay 0.01 on the GCNII layers and 5e-4 on the dense ones, row-normalised
// features, public split, early stopping on the validation loss with patience 100 within 1500
// epochs; test accuracy at the best validation epoch. One seed here (about a minute on two
// cores): >= 0.84 at seed 0. Over seeds 0-4 the same set-up gives 85.42% (docs/cli.md, GCNII; their
// paper: 85.5%).
TEST(TrainCora, Gcnii64LayersWithThePaperSetup) {
  const std::filesystem::path dir = std::filesystem::path(TESSERA_SHARED_DATASETS) / "cora";
  TESSERA_NEED_SHARED_DATASET(dir / "raw" / "edge.csv.gz");
  Dataset cora = read_ogb_raw(dir);
  TrainConfig config;
  config.dataset = dir.string();
  config.model = "gcnii";
  config.num_layers = 66;
  config.hidden_channels = 64;
  config.gcnii_alpha = 0.1f;
  config.gcnii_lambda = 0.5f;
  config.dropout = 0.6f;
  config.input_dropout = 0.6f;
  config.lr = 0.01f;
  config.weight_decay = 0.01f;
  config.dense_weight_decay = 5e-4f;
  config.normalize_features = true;
  config.epochs = 1500;
  config.patience = 100;
  config.patience_on = "loss";
  Trainer trainer(config, cora);
  const RunResult r = trainer.train_run(0);
  std::printf("seed 0: test at best valid %.4f (epoch %d; lowest valid loss at %d; %zu epochs)\n",
              r.test_at_best_valid, r.best_epoch, r.lowest_loss_epoch, r.epoch_seconds.size());
  EXPECT_GE(r.test_at_best_valid, 0.84);
  EXPECT_LT(r.epoch_seconds.size(), 1500u);  // the patience ended it
}

// GAT with the set-up of Velickovic et al. (2018) on Cora: two layers, 8 heads of 8 features
// concatenated, one output head, ELU, dropout 0.6 on both layers' inputs and on the attention
// weights, Adam lr 0.005, weight decay 5e-4, row-normalised features, public split, early stopping
// on the validation loss with patience 100 within 1000 epochs; test accuracy at the best
// validation epoch. One seed here (about 20 s on two cores): >= 0.82 at seed 0. Over seeds 0-4
// the same set-up gives the mean in docs/cli.md (GAT; their paper: 83.0 +- 0.7).
TEST(TrainCora, GatWithThePaperSetup) {
  const std::filesystem::path dir = std::filesystem::path(TESSERA_SHARED_DATASETS) / "cora";
  TESSERA_NEED_SHARED_DATASET(dir / "raw" / "edge.csv.gz");
  Dataset cora = read_ogb_raw(dir);
  TrainConfig config;
  config.dataset = dir.string();
  config.model = "gat";
  config.num_layers = 2;
  config.hidden_channels = 64;
  config.heads = 8;
  config.output_heads = 1;
  config.dropout = 0.6f;
  config.input_dropout = 0.6f;
  config.attention_dropout = 0.6f;
  config.lr = 0.005f;
  config.weight_decay = 5e-4f;
  config.normalize_features = true;
  config.epochs = 1000;
  config.patience = 100;
  config.patience_on = "loss";
  Trainer trainer(config, cora);
  const RunResult r = trainer.train_run(0);
  std::printf("seed 0: test at best valid %.4f (epoch %d; %zu epochs)\n", r.test_at_best_valid,
              r.best_epoch, r.epoch_seconds.size());
  EXPECT_GE(r.test_at_best_valid, 0.82);
  EXPECT_LT(r.epoch_seconds.size(), 1000u);  // the patience ended it
}

}  // namespace
}  // namespace tessera
