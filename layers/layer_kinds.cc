// SPDX-License-Identifier: Apache-2.0
// The table of layer kinds and the graph operators they aggregate with. Adding a kind: define
// `extern const LayerKind kYourLayer` in its own file (layers/gcn.cc is the model to follow)
// and add X(kYourLayer) to TESSERA_LAYER_KINDS below; --model, the Python module, the summaries
// and the tests that walk the table pick it up from here.
#include <ostream>
#include <utility>
#include <vector>

#include "core/error.h"
#include "layers/layer_kind.h"

#define TESSERA_LAYER_KINDS(X) \
  X(kGcnLayer) X(kSageLayer) X(kResGcnLayer) X(kGcniiLayer) X(kGatLayer)

namespace tessera {

#define TESSERA_DECLARE_KIND(kind) extern const LayerKind kind;
TESSERA_LAYER_KINDS(TESSERA_DECLARE_KIND)
#undef TESSERA_DECLARE_KIND

namespace {

#define TESSERA_KIND_ENTRY(kind) &kind,
constexpr const LayerKind* kKinds[] = {TESSERA_LAYER_KINDS(TESSERA_KIND_ENTRY)};
#undef TESSERA_KIND_ENTRY

Csr build_gcn_operator(Csr adjacency, std::span<const float> degrees) {
  const auto n = static_cast<std::size_t>(adjacency.num_rows());
  return gcn_normalized(std::move(adjacency).with_self_loops(), degrees.first(n), degrees);
}

Csr build_mean_operator(Csr adjacency, std::span<const float>) {
  return mean_normalized(std::move(adjacency));
}

Csr build_sum_operator(Csr adjacency, std::span<const float>) {
  const auto entries = static_cast<std::size_t>(adjacency.nnz());
  return std::move(adjacency).with_values(std::vector<float>(entries, 1.0f));
}

Csr build_attention_operator(Csr adjacency, std::span<const float>) {
  Csr pattern = std::move(adjacency).with_self_loops();
  const auto entries = static_cast<std::size_t>(pattern.nnz());
  return std::move(pattern).with_values(std::vector<float>(entries, 1.0f));
}

}  // namespace

const GraphOperator kGcnOperator = {"gcn", MatrixSymmetry::Symmetric, build_gcn_operator};
const GraphOperator kMeanOperator = {"mean", MatrixSymmetry::General, build_mean_operator};
const GraphOperator kSumOperator = {"sum", MatrixSymmetry::Symmetric, build_sum_operator};
const GraphOperator kAttentionOperator = {"attention", MatrixSymmetry::Symmetric,
                                          build_attention_operator};

std::span<const LayerKind* const> layer_kinds() { return kKinds; }

std::vector<std::string> layer_kind_names() {
  std::vector<std::string> names;
  for (const LayerKind* kind : kKinds) names.emplace_back(kind->name);
  return names;
}

const LayerKind& find_layer_kind(std::string_view name) {
  for (const LayerKind* kind : kKinds)
    if (kind->name == name) return *kind;
  TESSERA_FAIL(InvalidArgument, "model kind: expected one of ",
               detail::join_names(layer_kind_names()), ", got '", name, "'");
}

ModelKind parse_model_kind(const std::string& text) { return ModelKind(find_layer_kind(text)); }

std::string to_string(ModelKind kind) { return std::string(kind->name); }

std::ostream& operator<<(std::ostream& out, ModelKind kind) { return out << kind->name; }

}  // namespace tessera
