// SPDX-License-Identifier: Apache-2.0
// GraphView -> Dataset: one pass over each caller array (edges into the in-neighbour CSR,
// features into a tensor), every size and id checked first.
#include "api/graph_view.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"

namespace tessera {
namespace {

void check_ids(std::span<const std::int64_t> ids, std::int64_t n, const char* field) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    TESSERA_CHECK(ids[i] >= 0 && ids[i] < n, InvalidInput, "GraphView.", field, "[", i,
                  "] = ", ids[i], " is not a node id in [0, ", n, ")");
  }
}

std::vector<std::array<NodeId, 2>> edge_list(const GraphView& view) {
  const std::int64_t n = view.num_nodes;
  const bool coo = !view.src.empty() || !view.dst.empty();
  const bool csr = !view.indptr.empty() || !view.indices.empty();
  TESSERA_CHECK(coo != csr, InvalidArgument,
                "GraphView: give the edges either as src/dst (COO) or as indptr/indices (CSR), ",
                coo ? "not both" : "got neither");
  std::vector<std::array<NodeId, 2>> edges;
  if (coo) {
    TESSERA_CHECK(view.src.size() == view.dst.size(), InvalidArgument, "GraphView: src has ",
                  view.src.size(), " edges but dst has ", view.dst.size());
    check_ids(view.src, n, "src");
    check_ids(view.dst, n, "dst");
    edges.resize(view.src.size());
    for (std::size_t e = 0; e < edges.size(); ++e) {
      edges[e] = {static_cast<NodeId>(view.src[e]), static_cast<NodeId>(view.dst[e])};
    }
    return edges;
  }
  TESSERA_CHECK(static_cast<std::int64_t>(view.indptr.size()) == n + 1, InvalidArgument,
                "GraphView.indptr has ", view.indptr.size(), " entries, expected num_nodes + 1 = ",
                n + 1);
  TESSERA_CHECK(view.indptr.front() == 0 &&
                    view.indptr.back() == static_cast<std::int64_t>(view.indices.size()),
                InvalidInput, "GraphView.indptr must run from 0 to the ", view.indices.size(),
                " indices, got ", view.indptr.front(), " to ", view.indptr.back());
  for (std::int64_t v = 0; v < n; ++v) {
    TESSERA_CHECK(view.indptr[v] <= view.indptr[v + 1], InvalidInput, "GraphView.indptr[", v + 1,
                  "] = ", view.indptr[v + 1], " is less than indptr[", v, "] = ", view.indptr[v]);
  }
  check_ids(view.indices, n, "indices");
  edges.resize(view.indices.size());
  for (std::int64_t v = 0; v < n; ++v) {
    for (std::int64_t j = view.indptr[v]; j < view.indptr[v + 1]; ++j) {
      edges[j] = {static_cast<NodeId>(view.indices[j]), static_cast<NodeId>(v)};
    }
  }
  return edges;
}

std::vector<GlobalId> split(std::span<const std::int64_t> ids, std::int64_t n, const char* field) {
  check_ids(ids, n, field);
  return {ids.begin(), ids.end()};
}

}  // namespace

Dataset dataset_from_view(const GraphView& view) {
  const std::int64_t n = view.num_nodes, f = view.num_features;
  TESSERA_CHECK(n > 0, InvalidArgument, "GraphView.num_nodes must be positive, got ", n);
  TESSERA_CHECK(n <= std::numeric_limits<NodeId>::max(), InvalidArgument, "GraphView.num_nodes ",
                n, " exceeds the ", std::numeric_limits<NodeId>::max(), " nodes Tessera indexes");
  TESSERA_CHECK(f > 0, InvalidArgument, "GraphView.num_features must be positive, got ", f);
  TESSERA_CHECK(static_cast<std::int64_t>(view.features.size()) == n * f, InvalidArgument,
                "GraphView.features has ", view.features.size(),
                " values, expected num_nodes x num_features = ", n, " x ", f);
  TESSERA_CHECK(!view.train_idx.empty(), InvalidArgument, "GraphView.train_idx is empty");
  Dataset d;
  d.name = view.name;
  d.graph = csr_from_edges(n, edge_list(view), /*add_inverse_edge=*/false);
  d.num_edge_lines = static_cast<std::int64_t>(std::max(view.src.size(), view.indices.size()));
  d.features = Tensor(n, f);
  std::memcpy(d.features.f32(), view.features.data(), view.features.size_bytes());
  const bool multilabel = !view.targets.empty();
  TESSERA_CHECK(multilabel != !view.labels.empty(), InvalidArgument,
                "GraphView: give either labels (multi-class) or targets (multi-label), ",
                multilabel ? "not both" : "got neither");
  if (multilabel) {
    const std::int64_t t = view.num_tasks;
    TESSERA_CHECK(t > 0 && static_cast<std::int64_t>(view.targets.size()) == n * t,
                  InvalidArgument, "GraphView.targets has ", view.targets.size(),
                  " values, expected num_nodes x num_tasks = ", n, " x ", t);
    d.task = TaskType::MultiLabel;
    d.eval_metric = "rocauc";
    d.num_tasks = t;
    d.targets = Tensor(n, t);
    std::memcpy(d.targets.f32(), view.targets.data(), view.targets.size_bytes());
  } else {
    TESSERA_CHECK(static_cast<std::int64_t>(view.labels.size()) == n, InvalidArgument,
                  "GraphView.labels has ", view.labels.size(), " entries, expected num_nodes = ",
                  n);
    d.labels.assign(view.labels.begin(), view.labels.end());
    const std::int64_t top = *std::max_element(d.labels.begin(), d.labels.end());
    d.num_classes = view.num_classes > 0 ? view.num_classes : top + 1;
    TESSERA_CHECK(d.num_classes >= 2, InvalidInput, "GraphView: ", d.num_classes,
                  " classes (labels up to ", top, "); node classification needs at least 2");
  }
  d.train_idx = split(view.train_idx, n, "train_idx");
  d.valid_idx = split(view.valid_idx, n, "valid_idx");
  d.test_idx = split(view.test_idx, n, "test_idx");
  validate(d, "GraphView '" + view.name + "'");
  return d;
}

}  // namespace tessera
