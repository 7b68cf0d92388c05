// SPDX-License-Identifier: Apache-2.0
// tessera::GraphView: a node-property dataset held by the caller — edges, features, labels and
// the train/valid/test split — passed to Session::load without copying it first. Tessera reads
// the arrays once, on the rank that builds the parts, into its own partition-local layout (the
// one copy distributed training needs); the caller's arrays may be freed after load returns.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace tessera {

struct GraphView {
  std::string name = "graph";  // shown in progress lines and the summary
  std::int64_t num_nodes = 0;  // N

  // Edges, in exactly one of two forms (E edges, node ids in [0, N)):
  //  - COO: edge u -> v is (src[e], dst[e]) = (u, v), as PyG's edge_index rows;
  //  - CSR over destinations: row v lists the sources u of the edges u -> v
  //    (indptr (N + 1) from 0 to E, non-decreasing; indices (E)).
  // Repeated edges and self loops count once. Training makes the graph undirected, as OGB's
  // full-batch examples do (adj_t.to_symmetric()), so either direction of an edge is enough.
  std::span<const std::int64_t> src, dst;
  std::span<const std::int64_t> indptr, indices;

  std::span<const float> features;  // (N, F) row-major, finite
  std::int64_t num_features = 0;    // F

  // Multi-class node classification (metric: accuracy): labels (N) in [0, C), -1 = unlabelled.
  std::span<const std::int64_t> labels;
  std::int64_t num_classes = 0;  // C; 0: the largest label + 1
  // Or multi-label (metric: ROC-AUC over tasks, as OGB's proteins): targets (N, T) row-major
  // in {0, 1}, NaN = missing; labels then stay empty.
  std::span<const float> targets;
  std::int64_t num_tasks = 0;  // T

  // Node ids of the split (each unique, in [0, N)); train must not be empty.
  std::span<const std::int64_t> train_idx, valid_idx, test_idx;
};

}  // namespace tessera
