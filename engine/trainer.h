// Trainer: the full-graph training loop of one process — loads nothing itself; it takes a
// Dataset, builds the normalised graph operators once, then per run: initialise the model from
// seed + run, train for the configured epochs (Adam), evaluate with OGB's metric, keep the
// best-validation result. Epoch records go to a callback (metrics file, progress lines).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "datasets/dataset.h"
#include "engine/train_config.h"
#include "layers/model.h"

namespace tessera {

struct EpochRecord {
  int run = 0;
  int epoch = 0;           // 1-based
  double loss = 0.0;       // mean training loss of this epoch's step
  bool evaluated = false;  // train/valid/test metrics are set only on evaluated epochs
  double train_metric = 0.0;
  double valid_metric = 0.0;
  double test_metric = 0.0;
  double epoch_s = 0.0;    // training step: forward, backward, optimizer
  double eval_s = 0.0;     // evaluation forward and metrics (0 when not evaluated)
};

struct RunResult {
  int run = 0;
  std::uint64_t seed = 0;
  double best_valid = 0.0;
  double test_at_best_valid = 0.0;
  double train_at_best_valid = 0.0;
  int best_epoch = 0;
  double final_train = 0.0;
  double final_valid = 0.0;
  double final_test = 0.0;
  double final_loss = 0.0;
  std::vector<double> epoch_seconds;  // every epoch's training step
};

using EpochCallback = std::function<void(const EpochRecord&)>;

class Trainer {
 public:
  // Keeps a reference to `dataset`; it must outlive the trainer. Builds the graph operators
  // (symmetrised graph, GCN or mean normalisation) once.
  Trainer(const TrainConfig& config, const Dataset& dataset);
  ~Trainer();

  // Trains run `run` (seed = config.seed + run) from a fresh model.
  RunResult train_run(int run, const EpochCallback& on_epoch = {});

  // The model of the last run (its weights, embeddings of the last forward).
  const Model& model() const;
  // Seconds spent building the graph operators.
  double setup_seconds() const { return setup_s_; }
  std::int64_t num_graph_edges() const { return num_graph_edges_; }

 private:
  const TrainConfig config_;
  const Dataset& dataset_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  double setup_s_ = 0.0;
  std::int64_t num_graph_edges_ = 0;
};

}  // namespace tessera
