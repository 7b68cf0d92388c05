// SPDX-License-Identifier: Apache-2.0
// Dataset: one node-property-prediction graph in memory — the structure every loader fills
// (OGB raw layout, Tessera HDF5, synthetic) and everything downstream reads.
// Relies on core Csr and Tensor only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/csr.h"
#include "core/tensor.h"

namespace tessera {

class Hasher;

enum class TaskType {
  MultiClass,  // one class id per node; metric "acc"
  MultiLabel,  // T binary tasks per node; metric "rocauc"
};

struct Dataset {
  std::string name;
  TaskType task = TaskType::MultiClass;
  std::string eval_metric = "acc";  // "acc" or "rocauc", OGB Evaluator semantics
  std::int64_t num_classes = 0;     // MultiClass: C
  std::int64_t num_tasks = 1;       // MultiLabel: T
  bool add_inverse_edge = false;    // the flag the edges were read with (for writers)

  // Directed graph as read (after add_inverse_edge when set): row v lists the sources u of the
  // edges u -> v (in-neighbours), columns sorted, no duplicate entries. No values.
  Csr graph;
  // Number of edge lines in the file the graph was read from (before inversion).
  std::int64_t num_edge_lines = 0;

  Tensor features;                  // (N, F) f32
  std::vector<std::int64_t> labels; // MultiClass: N class ids, -1 = no label
  Tensor targets;                   // MultiLabel: (N, T) f32 in {0, 1}, NaN = missing

  std::vector<GlobalId> train_idx;  // split node ids as listed in the split files
  std::vector<GlobalId> valid_idx;
  std::vector<GlobalId> test_idx;

  std::int64_t num_nodes() const { return graph.num_rows(); }
  std::int64_t num_features() const { return features.cols(); }
  // Output width of the model: C for MultiClass, T for MultiLabel.
  std::int64_t num_outputs() const { return task == TaskType::MultiClass ? num_classes : num_tasks; }
};

// The most classes (or tasks) a dataset may declare: far past any node-property benchmark
// (ogbn-papers100M has 172 classes, ogbn-proteins 112 tasks), low enough that a count a file
// got wrong is refused by name instead of reaching the allocator as an N x C tensor.
inline constexpr std::int64_t kMaxOutputs = std::int64_t{1} << 20;
// The widest feature rows (or any matrix) a dataset may hold: past any dataset's (ogbn-papers100M:
// 128, ogbn-products: 100); a wider count in a file is a wrong one.
inline constexpr std::int64_t kMaxFeatures = std::int64_t{1} << 24;

// Checks the cross-array invariants (sizes agree, C or T in [1, kMaxOutputs], labels in [0, C) or
// -1, split ids in range and unique within a split, finite features); throws InvalidInput naming
// `source` otherwise.
void validate(const Dataset& dataset, const std::string& source);

// 64-bit fingerprint of the graph, features, labels and splits (stable across runs and
// machines); partitions and checkpoints record it to refuse mismatched data.
std::uint64_t fingerprint(const Dataset& dataset);
// The same for a dataset whose features are not held: `dataset.features` is ignored, and
// `add_features` hands the (N, num_features) values to the hasher in row order through
// Hasher::add_piece (called only when there are any).
std::uint64_t fingerprint(const Dataset& dataset, std::int64_t num_features,
                          const std::function<void(Hasher&)>& add_features);

// "multiclass" | "multilabel": how files name the task.
const char* to_string(TaskType task);
// The 16 hex digits files and messages show for a fingerprint.
std::string fingerprint_hex(std::uint64_t fingerprint);

// Divides each feature row by its sum (rows summing to 0 stay 0), as Kipf & Welling do.
void row_normalize_features(Dataset& dataset);
// The same on a (N, F) f32 tensor.
void row_normalize(Tensor& features);

}  // namespace tessera
