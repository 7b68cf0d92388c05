// tessera::Options: every setting of a training job through the public API, one field per
// train_gcn flag (the flag is named beside each field) with the same defaults: OGB's full-batch
// GCN examples (3 layers, 256 hidden, dropout 0.5, lr 0.01, 500 epochs), one run.
// Values are checked when a Session loads or trains; a bad one throws std::invalid_argument
// naming the flag.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

struct Options {
  // Model and optimiser.
  std::string model = "gcn";           // --model: gcn | sage | resgcn (residual, for deep models)
  int num_layers = 3;                  // --num-layers
  std::int64_t hidden_channels = 256;  // --hidden-channels
  float dropout = 0.5f;                // --dropout, after every hidden layer, in [0, 1)
  float input_dropout = 0.0f;          // --input-dropout, on the input features
  float lr = 0.01f;                    // --lr (Adam)
  float weight_decay = 0.0f;           // --weight-decay (on convolution weights)
  int epochs = 500;                    // --epochs per run
  std::uint64_t seed = 0;              // --seed of run 0; run r uses seed + r
  bool normalize_features = false;     // --normalize-features: rows divided by their sum
  bool batch_norm = false;             // --batch-norm between layers
  int eval_every = 1;                  // --eval-every N epochs (the last epoch always)
  int runs = 1;                        // --runs: independent runs (seeds)
  int threads = 0;                     // --threads per rank; 0: the cores shared among the
                                       // ranks on this node (or OMP_NUM_THREADS when set)
  std::string device = "cpu";          // --device

  // Distribution (graph parallel: one part per rank).
  int parts = 0;                       // --parts: must equal the number of ranks (and Slurm's
                                       // task count); 0: not checked
  std::string partition = "metis";     // --partition: metis | random | block (in process)
  std::string partitions_dir;          // --partitions: a store made by partition_graph
  double comm_timeout = 900.0;         // --comm-timeout seconds per wait; <= 0: never
  // Parallelism: graph (one part per rank, halos every layer), pipeline (one stage of
  // consecutive layers per rank over the whole graph, chunks streamed between stages) or
  // hybrid (ranks = parts x stages: a pipeline per graph part).
  std::string parallel = "graph";      // --parallel: graph | pipeline | hybrid
  int stages = 0;                      // --stages S per pipeline (hybrid; pipeline: the ranks)
  int chunks = 0;                      // --chunks per part, >= stages; 0: as many as stages
  double memory_budget_gb = 0.0;       // --memory-budget GiB per rank (pipelined modes refuse a
                                       // stage estimated above it); 0: node memory / its ranks

  // Halo message codecs.
  std::string codec = "none";          // --codec: none bf16 fp16 int8 int4 int2 adaptive
  std::string codec_backward;          // --codec-backward; empty: the same as codec
  bool error_feedback = false;         // --error-feedback
  double bit_budget = 4.0;             // --bit-budget (adaptive), bits per value in [2, 8]
  int replan_every = 10;               // --replan-every N epochs (adaptive)

  // Checkpoints (HDF5, written by rank 0 through a temporary file and a rename; global state,
  // so a job may resume on another number of ranks).
  std::string checkpoint_dir;          // --checkpoint-dir; empty: none written or read
  int checkpoint_every = 0;            // --checkpoint-every N epochs; 0: only on a stop signal
                                       // and at the end
  int keep_checkpoints = 2;            // --keep-checkpoints: the newest N are kept
  std::string resume = "auto";         // auto: continue from the newest valid checkpoint when
                                       // there is one; require (--resume): fail without one;
                                       // never (--no-resume): start over
  bool handle_signals = false;         // SIGUSR1/SIGTERM stop training after the epoch and a
                                       // checkpoint (train_gcn: on); off leaves the host
                                       // program's signal handling alone

  // Output (written by rank 0).
  std::string metrics_file;            // --metrics: one JSON object per evaluated epoch
  std::string summary_file;            // --summary: one JSON object at the end
  int verbosity = 0;                   // rank 0 on stderr: 0 nothing; 1 the set-up (launch,
                                       // dataset, partition); 2 also a line per evaluated
                                       // epoch (train_gcn: 2, or 1 with --quiet)
};

}  // namespace tessera
