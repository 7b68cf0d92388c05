// SPDX-License-Identifier: Apache-2.0
// Dataset helpers: validate (cross-array invariants, InvalidInput naming the source), a stable
// 64-bit fingerprint (word-wise FNV-1a-style hash over the arrays, NaNs canonicalised, sections
// tagged with their lengths) and Kipf & Welling's feature row normalisation.
#include "datasets/dataset.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>

#include "core/error.h"
#include "core/hash.h"

namespace tessera {
namespace {

void validate_graph(const Csr& graph, const std::string& source) {
  TESSERA_CHECK(graph.num_rows() == graph.num_cols(), InvalidInput, source, ": graph is ",
                graph.num_rows(), " x ", graph.num_cols(), ", expected a square adjacency");
  const auto& indptr = graph.indptr();
  const auto& indices = graph.indices();
  for (std::int64_t row = 0; row < graph.num_rows(); ++row) {
    for (EdgeOffset e = indptr[row] + 1; e < indptr[row + 1]; ++e) {
      TESSERA_CHECK(indices[e - 1] < indices[e], InvalidInput, source, ": graph row ", row,
                    " has columns ", indices[e - 1], ", ", indices[e],
                    " (expected sorted columns without duplicates)");
    }
  }
}

void validate_features(const Tensor& features, std::int64_t num_nodes, const std::string& source) {
  if (features.rows() == 0 && features.cols() == 0) return;  // no node features
  TESSERA_CHECK(features.dtype() == DType::F32, InvalidInput, source, ": features are ",
                to_string(features.dtype()), ", expected f32");
  TESSERA_CHECK(features.rows() == num_nodes, InvalidInput, source, ": features have ",
                features.rows(), " rows for ", num_nodes, " nodes");
  const float* values = features.f32();
  const std::int64_t count = features.numel();
  bool all_finite = true;
  for (std::int64_t i = 0; i < count; ++i) all_finite &= std::isfinite(values[i]);
  if (all_finite) return;
  for (std::int64_t i = 0; i < count; ++i) {
    TESSERA_CHECK(std::isfinite(values[i]), InvalidInput, source, ": feature (",
                  i / features.cols(), ", ", i % features.cols(), ") = ", values[i],
                  " is not finite");
  }
}

void validate_labels(const Dataset& dataset, const std::string& source) {
  const std::int64_t num_nodes = dataset.num_nodes();
  if (dataset.task == TaskType::MultiClass) {
    TESSERA_CHECK(dataset.num_classes >= 1 && dataset.num_classes <= kMaxOutputs, InvalidInput,
                  source, ": num_classes = ", dataset.num_classes, ", expected in [1, ",
                  kMaxOutputs, "]");
    TESSERA_CHECK(static_cast<std::int64_t>(dataset.labels.size()) == num_nodes, InvalidInput,
                  source, ": ", dataset.labels.size(), " labels for ", num_nodes, " nodes");
    for (std::size_t v = 0; v < dataset.labels.size(); ++v) {
      std::int64_t label = dataset.labels[v];
      TESSERA_CHECK(label >= -1 && label < dataset.num_classes, InvalidInput, source, ": label of node ",
                    v, " is ", label, ", expected -1 (none) or a class in [0, ",
                    dataset.num_classes, ")");
    }
    return;
  }
  TESSERA_CHECK(dataset.num_tasks >= 1 && dataset.num_tasks <= kMaxOutputs, InvalidInput, source,
                ": num_tasks = ", dataset.num_tasks, ", expected in [1, ", kMaxOutputs, "]");
  const Tensor& targets = dataset.targets;
  TESSERA_CHECK(targets.dtype() == DType::F32 && targets.rows() == num_nodes &&
                    targets.cols() == dataset.num_tasks,
                InvalidInput, source, ": targets are ", to_string(targets.dtype()), " ",
                targets.shape_string(), ", expected f32 (", num_nodes, ", ", dataset.num_tasks, ")");
  const float* values = targets.f32();
  for (std::int64_t i = 0; i < targets.numel(); ++i) {
    float value = values[i];
    TESSERA_CHECK(std::isnan(value) || value == 0.0f || value == 1.0f, InvalidInput, source,
                  ": target (", i / targets.cols(), ", ", i % targets.cols(), ") = ", value,
                  ", expected 0, 1 or NaN");
  }
}

void validate_split(const std::vector<GlobalId>& ids, std::int64_t num_nodes, const char* name,
                    const std::string& source) {
  std::vector<bool> seen(static_cast<std::size_t>(num_nodes), false);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    GlobalId id = ids[i];
    TESSERA_CHECK(id >= 0 && id < num_nodes, InvalidInput, source, ": ", name, " split entry ", i,
                  " is node ", id, ", outside [0, ", num_nodes, ")");
    TESSERA_CHECK(!seen[static_cast<std::size_t>(id)], InvalidInput, source, ": node ", id,
                  " appears twice in the ", name, " split");
    seen[static_cast<std::size_t>(id)] = true;
  }
}

}  // namespace

void validate(const Dataset& dataset, const std::string& source) {
  validate_graph(dataset.graph, source);
  const std::int64_t num_nodes = dataset.num_nodes();
  validate_features(dataset.features, num_nodes, source);
  validate_labels(dataset, source);
  TESSERA_CHECK(dataset.eval_metric == "acc" || dataset.eval_metric == "rocauc", InvalidInput,
                source, ": eval_metric '", dataset.eval_metric, "', expected acc or rocauc");
  TESSERA_CHECK(dataset.num_edge_lines >= 0, InvalidInput, source, ": num_edge_lines = ",
                dataset.num_edge_lines);
  validate_split(dataset.train_idx, num_nodes, "train", source);
  validate_split(dataset.valid_idx, num_nodes, "valid", source);
  validate_split(dataset.test_idx, num_nodes, "test", source);
}

const char* to_string(TaskType task) {
  return task == TaskType::MultiClass ? "multiclass" : "multilabel";
}

std::string fingerprint_hex(std::uint64_t fingerprint) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

std::uint64_t fingerprint(const Dataset& dataset) {
  const Tensor& features = dataset.features;
  return fingerprint(dataset, features.cols(), [&](Hasher& hasher) {
    hasher.add_piece(std::span(features.f32(), static_cast<std::size_t>(features.numel())));
  });
}

std::uint64_t fingerprint(const Dataset& dataset, std::int64_t num_features,
                          const std::function<void(Hasher&)>& add_features) {
  Hasher hasher;
  hasher.add_word(static_cast<std::uint64_t>(dataset.num_nodes()));
  hasher.add_section(1, std::span(dataset.graph.indptr()));
  hasher.add_section(2, std::span(dataset.graph.indices()));
  hasher.add_word(static_cast<std::uint64_t>(num_features));
  if (dataset.num_nodes() * num_features > 0) {
    hasher.begin_section(3, static_cast<std::uint64_t>(dataset.num_nodes() * num_features));
    add_features(hasher);
    hasher.end_section();
  }
  hasher.add_word(dataset.task == TaskType::MultiClass ? 0 : 1);
  hasher.add_word(static_cast<std::uint64_t>(dataset.num_outputs()));
  if (dataset.task == TaskType::MultiClass) {
    hasher.add_section(4, std::span(dataset.labels));
  } else {
    // NaN payloads differ between producers; hash every NaN as the same value.
    std::vector<float> targets(dataset.targets.f32(),
                               dataset.targets.f32() + dataset.targets.numel());
    for (float& value : targets) {
      if (std::isnan(value)) value = std::numeric_limits<float>::quiet_NaN();
    }
    hasher.add_section(5, std::span<const float>(targets));
  }
  hasher.add_section(6, std::span(dataset.train_idx));
  hasher.add_section(7, std::span(dataset.valid_idx));
  hasher.add_section(8, std::span(dataset.test_idx));
  return hasher.finish();
}

void row_normalize_features(Dataset& dataset) { row_normalize(dataset.features); }

void row_normalize(Tensor& features) {
  if (features.numel() == 0) return;
  const std::int64_t num_rows = features.rows();
  const std::int64_t width = features.cols();
  float* values = features.f32();
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < num_rows; ++r) {
    float* row = values + r * width;
    double sum = 0.0;
    for (std::int64_t c = 0; c < width; ++c) sum += row[c];
    if (sum == 0.0) continue;
    double inverse = 1.0 / sum;
    for (std::int64_t c = 0; c < width; ++c) row[c] = static_cast<float>(row[c] * inverse);
  }
}

}  // namespace tessera
