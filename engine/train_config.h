// SPDX-License-Identifier: Apache-2.0
// TrainConfig: every setting of a training run — the options of include/tessera/options.h, as
// train_gcn and the Python module fill them — with the typed views the engine reads them
// through, and validate(), which applies every check the option table declares plus the rules
// of the chosen parallel mode (engine/modes.h). The option table itself, with the summary and
// checkpoint records it produces, is engine/option_table.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/codec.h"
#include "layers/layer_kind.h"
#include "tessera/options.h"

namespace tessera {

// How the ranks share the work (engine/modes.h has the table and the runners):
//   Graph     one graph part per rank; halo rows exchanged at every layer
//   Pipeline  K ranks = K stages of consecutive layers over the whole graph, which is cut into
//             chunks that stream from stage to stage (GNNPipe)
//   Hybrid    K = G x S ranks: G graph parts, each trained by a pipeline of S stages; halos
//             between the parts at the stage level, stage gradients all-reduced over the parts
enum class ParallelMode { Graph, Pipeline, Hybrid };
ParallelMode parse_parallel_mode(const std::string& text);  // InvalidArgument naming --parallel
std::string to_string(ParallelMode mode);

// What --resume says: Auto continues from the newest valid checkpoint in checkpoint_dir when
// there is one (one of another configuration or dataset is an error naming the difference);
// Require does the same, but no valid checkpoint is an error; Never starts over (existing
// checkpoints get replaced).
enum class ResumeMode { Auto, Require, Never };
ResumeMode parse_resume_mode(const std::string& text);  // auto | require | never
std::vector<std::string> resume_mode_names();
std::vector<std::string> patience_on_names();  // what --patience watches: metric | loss

struct TrainConfig : Options {
  TrainConfig() = default;
  explicit TrainConfig(const Options& options) : Options(options) {}

  ModelKind kind() const { return parse_model_kind(model); }
  ParallelMode mode() const { return parse_parallel_mode(parallel); }
  ResumeMode resume_mode() const { return parse_resume_mode(resume); }
  bool adaptive() const { return codec == "adaptive"; }
  // The fixed codec of halo embeddings (None with adaptive, whose bits are planned per row) and
  // of halo gradients (--codec-backward, else the same as --codec).
  CodecKind forward_codec() const;
  CodecKind backward_codec() const;
  // What the propagators aggregate (--aggregate-dtype): F32 or BF16.
  DType aggregation_dtype() const;
  // How the input features are kept (--feature-dtype): F32 or BF16.
  DType features_dtype() const;
  LayerHyper hyper() const {  // the kinds' hyperparameters (--gcnii-*, --heads, ...)
    return {gcnii_alpha, gcnii_lambda, heads, output_heads, attention_dropout};
  }
  bool progress() const { return verbosity >= 2; }  // per-epoch lines and load progress
};

// Throws InvalidArgument naming the flag when a value is out of range or a combination is
// refused: the checks of the option table (engine/option_table.h), then the rules of the mode.
void validate(const TrainConfig& config);

// The option table's custom checks (Custom(...) in TESSERA_OPTIONS) and record values.
void check_model(const TrainConfig& config);  // the rules of --model that read other options
void check_dense_weight_decay(const TrainConfig& config);  // -1 or >= 0
void check_device(const TrainConfig& config);
void check_codec(const TrainConfig& config);
void check_codec_backward(const TrainConfig& config);
std::vector<std::string> aggregate_dtype_names();       // f32 bf16
void check_aggregate_dtype(const TrainConfig& config);  // CPU, and a model without attention
void check_feature_dtype(const TrainConfig& config);    // the same
void check_resume(const TrainConfig& config);
std::string backward_codec_name(const TrainConfig& config);  // codec_backward or --codec
void check_output_files(const TrainConfig& config);          // .npy or .csv
void check_embedding_layer(const TrainConfig& config);       // -1 or in [0, --num-layers)
void check_predict(const TrainConfig& config);               // no training outputs with --predict
// The layer --save-embeddings writes: --embedding-layer, or the last hidden one (-1).
int embedding_layer_of(const TrainConfig& config);

}  // namespace tessera
