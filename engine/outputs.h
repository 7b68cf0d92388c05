// SPDX-License-Identifier: Apache-2.0
// What a run writes besides its metrics and summary, for the steps that come after training:
// every node's rows gathered onto rank 0 in node-id order, class probabilities, matrices as .npy
// or .csv files (written through a temporary file and a rename), and model files — the weights
// and the options that define the model — which --predict reads back, as it reads checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"
#include "engine/checkpoint.h"
#include "engine/train_config.h"

namespace tessera {

// Every rank's rows (local: (n, cols) on the host, or null when this rank holds none, as a
// pipeline stage before the last) with their global ids, as one (num_nodes, cols) matrix in
// node-id order on rank 0 (empty elsewhere). Collective.
Tensor gather_by_id(Communicator& comm, const Tensor* local, std::span<const GlobalId> ids,
                    std::int64_t num_nodes, std::int64_t cols);

// Probabilities from logits, in place: a softmax per row (multi-class) or a sigmoid per value
// (multi-label).
void to_probabilities(Tensor& logits, bool multiclass);

// Writes a matrix to `path`, as NumPy's .npy (float32, C order) or as CSV (a line per row, values
// with 9 significant digits) by its extension; through a temporary file and a rename. Io naming
// the file on failure.
void write_matrix(const std::filesystem::path& path, const Tensor& matrix);
// InvalidArgument naming `flag` unless `path` ends in .npy or .csv.
void check_matrix_path(const std::string& flag, const std::string& path);
// InvalidArgument naming the flag when the folder of an output file that is set (--metrics,
// --summary, --save-predictions, --save-embeddings, --save-model) is missing or not writable,
// when the path is a folder, and when two of them name the same file.
void check_output_dirs(const TrainConfig& config);

// A model file: the options the weights were trained under (as a checkpoint's identity: the
// dataset, then ("--flag", value)) and the weights.
struct ModelFile {
  CheckpointIdentity identity;
  std::vector<float> params;   // the model's flat parameters
  std::vector<float> buffers;  // batch-norm running statistics (may be empty)
};
std::vector<std::byte> model_image(const ModelFile& model);
// A model file's or a checkpoint's image (a checkpoint gives its identity and current weights).
// InvalidInput naming `label` when it is neither.
ModelFile model_from_image(std::span<const std::byte> image, const std::string& label);
// The options a model file defines (the layer kind, the layers and their width, batch norm,
// feature normalisation), set in `config` from its identity; InvalidInput naming `label` when
// one is missing or malformed.
void apply_model_options(TrainConfig& config, const CheckpointIdentity& identity,
                         const std::string& label);

}  // namespace tessera
