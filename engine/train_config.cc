// SPDX-License-Identifier: Apache-2.0
// validate(): the option table's checks and the chosen mode's rules; the typed views of
// TrainConfig; and the custom checks the table names (Custom(...) in TESSERA_OPTIONS).
#include "engine/train_config.h"

#include <algorithm>
#include <utility>

#include "core/device.h"
#include "core/error.h"
#include "engine/modes.h"
#include "engine/option_table.h"
#include "engine/outputs.h"

namespace tessera {
namespace {

constexpr const char* kResumeNames[] = {"auto", "require", "never"};

}  // namespace

ResumeMode parse_resume_mode(const std::string& text) {
  for (std::size_t i = 0; i < std::size(kResumeNames); ++i)
    if (text == kResumeNames[i]) return static_cast<ResumeMode>(i);
  TESSERA_FAIL(InvalidArgument, "resume must be auto, require or never, got '", text, "'");
}

std::vector<std::string> resume_mode_names() {
  return {std::begin(kResumeNames), std::end(kResumeNames)};
}

std::vector<std::string> patience_on_names() { return {"metric", "loss"}; }

CodecKind TrainConfig::forward_codec() const {
  return adaptive() ? CodecKind::None : parse_codec(codec);
}

CodecKind TrainConfig::backward_codec() const {
  return codec_backward.empty() ? forward_codec() : parse_codec(codec_backward);
}

void validate(const TrainConfig& config) {
  check_options(config);
  mode_spec(config.mode()).validate(config);
}

void check_model(const TrainConfig& c) {
  if (c.kind()->attention) {
    // (--heads < 1 is refused by its own rule, checked after --model.)
    TESSERA_CHECK(c.heads < 1 || c.num_layers == 1 || c.hidden_channels % c.heads == 0,
                  InvalidArgument,
                  "--hidden-channels ", c.hidden_channels, " must be a multiple of --heads ",
                  c.heads, " (--model ", c.model, " concatenates the heads)");
  }
  if (!c.kind()->initial_residual) return;  // (OneOf, checked before, names an unknown kind)
  TESSERA_CHECK(c.num_layers >= 3, InvalidArgument, "--num-layers ", c.num_layers, ": --model ",
                c.model,
                " needs >= 3 (a dense input layer, at least one convolution, a dense output "
                "layer)");
}

void check_dense_weight_decay(const TrainConfig& c) {
  TESSERA_CHECK(c.dense_weight_decay == -1.0f || c.dense_weight_decay >= 0.0f, InvalidArgument,
                "--dense-weight-decay: expected -1 (the same as --weight-decay) or a value >= 0, "
                "got ",
                c.dense_weight_decay);
}

void check_device(const TrainConfig& c) {
  parse_device(c.device);  // a clear error when the device is unknown or has no usable GPU
}

void check_codec(const TrainConfig& c) {
  TESSERA_CHECK(!c.adaptive() || c.mode() == ParallelMode::Graph, InvalidArgument, "--parallel ",
                c.parallel,
                ": --codec adaptive applies to --parallel graph; the fixed codecs apply to the "
                "pipeline streams");
}

std::vector<std::string> aggregate_dtype_names() { return {"f32", "bf16"}; }

DType TrainConfig::aggregation_dtype() const {
  return aggregate_dtype == "bf16" ? DType::BF16 : DType::F32;
}

DType TrainConfig::features_dtype() const {
  return feature_dtype == "bf16" ? DType::BF16 : DType::F32;
}

namespace {

// --aggregate-dtype and --feature-dtype: bf16 rows are read by the CPU kernels only, and not by
// attention.
void check_bf16_rows(const TrainConfig& c, const char* flag, const std::string& value,
                     const char* what) {
  if (value == "f32") return;
  TESSERA_CHECK(c.device == "cpu", InvalidArgument, flag, " ", value, ": ", what,
                " runs on CPU ranks; --device ", c.device, " reads f32 rows");
  TESSERA_CHECK(!c.kind()->attention, InvalidArgument, flag, " ", value, ": --model ", c.model,
                " weights every edge with attention, which reads f32 rows");
}

}  // namespace

void check_aggregate_dtype(const TrainConfig& c) {
  check_bf16_rows(c, "--aggregate-dtype", c.aggregate_dtype, "reduced-precision aggregation");
}

void check_feature_dtype(const TrainConfig& c) {
  check_bf16_rows(c, "--feature-dtype", c.feature_dtype, "keeping the features in bf16");
}

void check_codec_backward(const TrainConfig& c) {
  if (c.codec_backward.empty()) return;
  TESSERA_CHECK(!c.adaptive(), InvalidArgument,
                "--codec adaptive plans both directions; --codec-backward does not apply");
  const std::vector<std::string> names = codec_names();
  if (std::find(names.begin(), names.end(), c.codec_backward) != names.end()) return;
  TESSERA_FAIL(InvalidArgument, "--codec-backward: expected one of ", detail::join_names(names),
               ", got '", c.codec_backward, "'");
}

void check_resume(const TrainConfig& c) {
  TESSERA_CHECK(c.resume_mode() != ResumeMode::Require || !c.checkpoint_dir.empty(),
                InvalidArgument, "--resume needs --checkpoint-dir");
}

void check_output_files(const TrainConfig& c) {
  if (!c.save_predictions.empty()) check_matrix_path("--save-predictions", c.save_predictions);
  if (!c.save_embeddings.empty()) check_matrix_path("--save-embeddings", c.save_embeddings);
}

void check_embedding_layer(const TrainConfig& c) {
  TESSERA_CHECK(
      c.embedding_layer == -1 || (c.embedding_layer >= 0 && c.embedding_layer < c.num_layers),
      InvalidArgument, "--embedding-layer must be -1 or in [0, ", c.num_layers,
      ") (--num-layers), got ", c.embedding_layer);
}

void check_predict(const TrainConfig& c) {
  if (c.predict.empty()) return;
  const std::pair<const char*, const std::string*> training_outputs[] = {
      {"--metrics", &c.metrics},
      {"--summary", &c.summary},
      {"--save-model", &c.save_model},
      {"--checkpoint-dir", &c.checkpoint_dir}};
  for (const auto& [flag, value] : training_outputs)
    TESSERA_CHECK(value->empty(), InvalidArgument, "--predict evaluates without training: ", flag,
                  " does not apply (use --save-predictions or --save-embeddings)");
}

int embedding_layer_of(const TrainConfig& c) {
  return c.embedding_layer >= 0 ? c.embedding_layer : std::max(0, c.num_layers - 2);
}

std::string backward_codec_name(const TrainConfig& c) {
  return c.codec_backward.empty() ? c.codec : c.codec_backward;
}

}  // namespace tessera
