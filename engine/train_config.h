// TrainConfig: every setting of a training run, with the defaults of OGB's full-batch GCN
// examples (ogbn-arxiv: 3 layers, 256 hidden, dropout 0.5, lr 0.01, 500 epochs), except that
// one run is the default. train_gcn fills it from flags; library users fill it directly.
#pragma once

#include <cstdint>
#include <string>

#include "layers/model.h"

namespace tessera {

enum class ResumeMode { Auto, Require, Never };

// How the ranks share the work (engine/pipeline.h for the two pipelined modes):
//   Graph     one graph part per rank; halo rows exchanged at every layer
//   Pipeline  K ranks = K stages of consecutive layers over the whole graph, which is cut into
//             chunks that stream from stage to stage (GNNPipe)
//   Hybrid    K = G x S ranks: G graph parts, each trained by a pipeline of S stages; halos
//             between the parts at the stage level, stage gradients all-reduced over the parts
enum class ParallelMode { Graph, Pipeline, Hybrid };
ParallelMode parse_parallel_mode(const std::string& text);  // graph | pipeline | hybrid
std::string to_string(ParallelMode mode);

struct TrainConfig {
  std::string dataset = "synth:default";  // raw-layout dir, .h5 file or synth:PRESET[:SEED]
  ModelKind model = ModelKind::Gcn;
  int num_layers = 3;
  std::int64_t hidden_channels = 256;
  float dropout = 0.5f;
  float input_dropout = 0.0f;
  float lr = 0.01f;
  float weight_decay = 0.0f;
  int epochs = 500;
  std::uint64_t seed = 0;
  bool normalize_features = false;
  int eval_every = 1;
  int runs = 1;
  bool batch_norm = false;
  int threads = 0;                // 0: keep OpenMP's default
  std::string device = "cpu";
  ParallelMode parallel = ParallelMode::Graph;
  int stages = 0;                 // hybrid: S stages per pipeline (K / S graph parts); pipeline:
                                  // 0 or the number of ranks
  int chunks = 0;                 // pipeline/hybrid: chunks per part, >= stages; 0: the stages
  double memory_budget_gb = 0.0;  // pipeline/hybrid: GiB one rank may use; 0: this node's
                                  // memory shared among its ranks
  // Halo embeddings (forward): none|bf16|fp16|int8|int4|int2, or adaptive (2/4/8 bits per
  // message, both directions, under bit_budget bits per value, re-planned every replan_every).
  std::string codec = "none";
  std::string codec_backward;     // halo gradients; empty: the same as codec
  bool error_feedback = false;    // carry each row's quantisation residual to its next message
  double bit_budget = 4.0;
  int replan_every = 10;
  // Checkpoints (engine/checkpoint.h), written by rank 0. Empty checkpoint_dir: none are written
  // or read. A stop signal (SIGUSR1, SIGTERM) always writes one before training stops, and the
  // last epoch of the last run writes one, so that a job restarted after it finished only
  // reports.
  std::string checkpoint_dir;
  int checkpoint_every = 0;       // epochs (of a run) between checkpoints; 0: only the above
  int keep_checkpoints = 2;       // newest checkpoints kept in checkpoint_dir, >= 1
  // Auto: continue from the newest valid checkpoint in checkpoint_dir when there is one (one of
  // another configuration or dataset is an error naming the difference); Require: the same, but
  // no valid checkpoint is an error; Never: start over (existing checkpoints get replaced).
  ResumeMode resume = ResumeMode::Auto;
  // SIGUSR1 and SIGTERM stop training at the end of the current epoch on every rank (checkpoint
  // first, when checkpoint_dir is set) instead of ending the process; Trainer::train installs
  // the handlers (engine/system.h). Library users that handle signals themselves turn it off.
  bool handle_signals = true;
  std::string metrics_file;       // one JSON object per evaluated epoch; empty: none
  std::string summary_file;       // one JSON object at the end; empty: none
  bool progress = true;           // per-epoch lines and load progress on stderr
};

// Throws InvalidArgument naming the flag when a value is out of range.
void validate(const TrainConfig& config);

}  // namespace tessera
