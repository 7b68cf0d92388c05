// SPDX-License-Identifier: Apache-2.0
// Trainer: the full-graph training loop of one rank, written once for every parallel mode. It
// takes this rank's GraphPart and the communicator spanning all ranks (a SelfCommunicator, and
// the whole graph as the only part, on one process — the same code path) and sets up the
// mode's runner (engine/mode_runner.h: operators, exchanges, pipeline), then per run:
// initialise the model from seed + run, train for the configured epochs (Adam, gradients
// all-reduced), evaluate with OGB's metric over all ranks, keep the best-validation result;
// with checkpoints, resume and stop signals as configured. Epoch records go to a callback
// (metrics file, progress lines); every rank gets the same ones.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "datasets/dataset.h"
#include "engine/mode_runner.h"
#include "engine/train_config.h"
#include "layers/model.h"
#include "partition/graph_part.h"
#include "tessera/epoch_hook.h"

namespace tessera {

// Bytes sent by all ranks together, per category, in one training step.
using TrafficBytes = std::array<std::uint64_t, static_cast<int>(TrafficCategory::Count)>;

struct EpochRecord {
  int run = 0;
  int epoch = 0;           // 1-based
  double loss = 0.0;       // mean training loss of this epoch's step (over all ranks)
  bool evaluated = false;  // train/valid/test metrics are set only on evaluated epochs
  double train_metric = 0.0;
  double valid_metric = 0.0;
  double test_metric = 0.0;
  double valid_loss = 0.0;  // mean loss over the validation rows (evaluated epochs)
  double epoch_s = 0.0;    // training step: forward, backward, all-reduce, optimizer
  double eval_s = 0.0;     // evaluation forward and metrics (0 when not evaluated)
  // Communication of the training step, mean over ranks: halo exchanges (start to completion)
  // plus all-reduces (blocking); the part of the halo time hidden behind aggregation.
  double comm_s = 0.0;
  double comm_hidden_s = 0.0;
  TrafficBytes bytes{};      // sent by all ranks in the training step, by category
  TrafficBytes raw_bytes{};  // the same before message encoding
  double encode_s = 0.0;     // codec time of the step, mean over ranks
  double decode_s = 0.0;
  std::string bit_plan;      // adaptive codec: this rank's new plan (on re-planning epochs)
  std::vector<std::uint64_t> peak_rss_bytes;  // (K) every rank's peak resident memory so far
  // Trainer::train after a resume: an epoch trained before the checkpoint, handed to the
  // callback again (from the checkpoint) so that a metrics file equals the uninterrupted one.
  bool replayed = false;
};

// One run's metrics in the terms of OGB's Logger: the highest train and valid metric over the
// evaluated epochs, and train and test at the epoch of the highest valid (what OGB's "Final
// Train" and "Final Test" mean); then the last evaluated epoch's (final_*: the last epoch).
struct RunResult {
  int run = 0;
  std::uint64_t seed = 0;
  double highest_train = 0.0;
  double best_valid = 0.0;  // the highest valid
  double test_at_best_valid = 0.0;
  double train_at_best_valid = 0.0;
  int best_epoch = 0;
  // The lowest validation loss so far and its epoch (what --patience-on loss watches).
  double lowest_valid_loss = 0.0;
  int lowest_loss_epoch = 0;
  double final_train = 0.0;  // of the last evaluated epoch
  double final_valid = 0.0;
  double final_test = 0.0;
  double final_loss = 0.0;
  std::vector<double> epoch_seconds;  // every epoch's training step
  std::vector<double> comm_seconds;   // every epoch's comm_s
  std::vector<double> hidden_seconds; // every epoch's comm_hidden_s
  std::vector<double> encode_seconds; // every epoch's encode_s
  std::vector<double> decode_seconds; // every epoch's decode_s
  TrafficBytes bytes_per_epoch{};     // mean over epochs of EpochRecord::bytes
  TrafficBytes raw_bytes_per_epoch{}; // the same before message encoding
};

// The model a run trains on `data`: the configuration's kind, widths, dropout and hyperparameters,
// seeded with seed + run.
ModelConfig model_config(const TrainConfig& config, const DatasetInfo& data, int run = 0);

// Sizes of the whole graph, summed over ranks at set-up.
struct GraphTotals {
  std::int64_t train_nodes = 0;
  std::int64_t valid_nodes = 0;
  std::int64_t test_nodes = 0;
  std::int64_t operator_nnz = 0;  // entries of the normalised operator (with self loops for GCN)
};

using EpochCallback = EpochHook<EpochRecord>;  // false: stop after this epoch
struct CheckpointState;  // engine/checkpoint.h

// Exit status of train_gcn when a stop signal ended training after a checkpoint was written
// (EX_TEMPFAIL: run it again to continue). Batch scripts requeue on it.
inline constexpr int kExitStopped = 75;

// What Trainer::train did.
struct TrainOutcome {
  std::vector<RunResult> results;  // every run when not stopped (finished runs otherwise)
  bool stopped = false;            // a stop signal ended training early
  bool early_stopped = false;      // the epoch callback ended training (a finished training)
  int stop_signal = 0;             // the signal this rank received (0: another rank's)
  int stop_run = 0;                // run and epochs completed when it stopped
  int stop_epoch = 0;
  std::string checkpoint;          // the last checkpoint written (rank 0; empty: none)
  std::string resumed_from;        // the checkpoint training continued from (empty: none)
  int resumed_ranks = 0;           // ranks that wrote it
};

class Trainer {
 public:
  // One rank of a distributed (or single-process) job. Collective: every rank of `comm`
  // constructs its Trainer and calls train_run the same number of times. `comm` must outlive
  // the trainer.
  Trainer(const TrainConfig& config, GraphPart part, Communicator& comm);
  // Single process on a dataset held by the caller (it is copied into the one part).
  Trainer(const TrainConfig& config, const Dataset& dataset);
  ~Trainer();

  // Trains run `run` (seed = config.seed + run) from a fresh model.
  RunResult train_run(int run, const EpochCallback& on_epoch = {});
  // Every run of the configuration with checkpoints, resume and stop signals as configured
  // (checkpoint_dir, checkpoint_every, resume, handle_signals): continues from the newest valid
  // checkpoint, replaying its epoch records to on_epoch (replayed = true), and returns early
  // with stopped = true when any rank got SIGUSR1 or SIGTERM, after the epoch in progress and
  // its checkpoint. Collective; throws AgreedError on bad checkpoints or directories.
  TrainOutcome train(const EpochCallback& on_epoch = {});

  // The model of the last run (its weights, embeddings of the last forward, owned rows): on a
  // pipeline stage, the stage's slice.
  const Model& model() const;
  // The whole model's parameters and batch-norm buffers on rank 0, gathered from the stages in
  // the pipelined modes (empty elsewhere). Collective.
  std::pair<std::vector<float>, std::vector<float>> whole_weights();
  const GraphPart& part() const;
  const GraphTotals& totals() const;
  // How the ranks share the work (mode, parts, stages, chunks), for reports.
  ParallelInfo parallel_info() const;
  // An evaluation pass of the current model (the last run's, or load_weights'): this rank's
  // host logits in part order (the rows of part().graph.owned_ids), or null on a rank that
  // scores none; model().embeddings() then hold every layer's output. Collective.
  const Tensor* evaluate_now();
  // A model of the configuration with these weights instead of a trained one (--predict):
  // (num_params) parameters and the batch-norm buffers. InvalidInput when the sizes differ.
  void load_weights(std::span<const float> params, std::span<const float> buffers);
  // Seconds spent building the graph operators.
  double setup_seconds() const { return setup_s_; }

 private:
  struct RunState;
  void setup();
  // Local checks and preparation of the part (agreed by setup()).
  void prepare_part();
  RunState begin_run(int run);
  // One epoch of the run; returns whether any rank asked to stop (agreed).
  // How an epoch ended: go on, a stop signal on some rank, or a callback that asked to stop.
  enum class EpochEnd { Continue, Signal, Asked };
  EpochEnd train_epoch(RunState& state, const EpochCallback& on_epoch);
  bool patience_spent(const RunState& state) const;
  // The evaluation of an epoch: metrics into `record`, best-validation tracking into the run.
  void evaluate_epoch(RunState& state, EpochRecord& record);
  RunResult finish_run(RunState& state);
  // Continues from a checkpoint found in checkpoint_dir (every rank gets its image; agreed), or
  // returns nothing.
  std::optional<CheckpointState> find_resume_point(TrainOutcome& out);
  // Restores the run from a checkpoint; collective (agreed).
  void restore_run(RunState& state, const CheckpointState& checkpoint);
  // Rank 0 writes the run's state to config.checkpoint_dir; collective (agreed). Returns the path
  // on rank 0.
  std::string save_checkpoint(const RunState& state, std::uint64_t partition_fingerprint);

  const TrainConfig config_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  double setup_s_ = 0.0;
};

}  // namespace tessera
