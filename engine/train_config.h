// TrainConfig: every setting of a training run, with the defaults of OGB's full-batch GCN
// examples (ogbn-arxiv: 3 layers, 256 hidden, dropout 0.5, lr 0.01, 500 epochs), except that
// one run is the default. train_gcn fills it from flags; library users fill it directly.
#pragma once

#include <cstdint>
#include <string>

#include "layers/model.h"

namespace tessera {

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
  // Halo embeddings (forward): none|bf16|fp16|int8|int4|int2, or adaptive (2/4/8 bits per
  // message, both directions, under bit_budget bits per value, re-planned every replan_every).
  std::string codec = "none";
  std::string codec_backward;     // halo gradients; empty: the same as codec
  bool error_feedback = false;    // carry each row's quantisation residual to its next message
  double bit_budget = 4.0;
  int replan_every = 10;
  std::string metrics_file;       // one JSON object per evaluated epoch; empty: none
  std::string summary_file;       // one JSON object at the end; empty: none
  bool progress = true;           // per-epoch lines and load progress on stderr
};

// Throws InvalidArgument naming the flag when a value is out of range.
void validate(const TrainConfig& config);

}  // namespace tessera
