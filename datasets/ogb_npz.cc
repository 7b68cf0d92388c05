// SPDX-License-Identifier: Apache-2.0
// OGB's binary layout, as ogbn-papers100M ships: raw/data.npz (edge_index (2, E), node_feat
// (N, F), num_nodes_list, num_edges_list) and raw/node-label.npz (node_label, NaN for no label),
// splits as in the CSV layout. read_npz_arrays reads it into memory; open_npz_source offers it a
// block at a time, which convert_ogb streams into Tessera HDF5. Both check every array the same
// way and give the same arrays and fingerprint.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "datasets/hdf5_format.h"
#include "datasets/hdf5_io.h"
#include "datasets/loaders.h"
#include "datasets/npz.h"
#include "datasets/ogb_layout.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ogb::OgbFlags;
using Edge = std::array<NodeId, 2>;  // (source, destination)

constexpr std::int64_t kIdBlock = std::int64_t{1} << 20;  // ids per read of edge_index

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

// num_nodes_list / num_edges_list: one entry (one graph).
std::int64_t read_one_count(const npz::Archive& data, const char* name) {
  npz::ArrayReader r = data.open(name);
  TESSERA_CHECK(r.info().count() == 1, InvalidInput, r.where(), ": ", r.info().count(),
                " entries; expected one (datasets of several graphs are not supported)");
  std::int64_t value = 0;
  r.read_int64(&value, 1);
  TESSERA_CHECK(value >= 0, InvalidInput, r.where(), ": negative count ", value);
  return value;
}

struct Counts {
  std::int64_t nodes = 0;
  std::int64_t edges = 0;
};

Counts read_counts(const npz::Archive& data, const OgbFlags& flags) {
  Counts c;
  c.nodes = read_one_count(data, "num_nodes_list");
  TESSERA_CHECK(c.nodes <= ogb::kMaxNodes, InvalidInput, data.path(), ": ", c.nodes,
                " nodes; graphs past 2^31 - 1 nodes are not supported");
  TESSERA_CHECK(!flags.num_nodes || *flags.num_nodes == c.nodes, InvalidInput, flags.source,
                ": num_nodes = ", flags.num_nodes.value_or(0), ", but ", data.path(), " says ",
                c.nodes);
  c.edges = read_one_count(data, "num_edges_list");
  return c;
}

// edge_index (2, E): the E sources, then the E destinations.
npz::ArrayReader open_edges(const npz::Archive& data, std::int64_t num_edges) {
  npz::ArrayReader r = data.open("edge_index");
  const std::vector<std::int64_t>& shape = r.info().shape;
  TESSERA_CHECK(shape.size() == 2 && shape[0] == 2 && shape[1] == num_edges, InvalidInput,
                r.where(), ": shape ", shape_text(shape), ", expected (2, ", num_edges,
                ") from num_edges_list");
  return r;
}

// The next n ids of side 0 (sources) or 1 (destinations), edges first.., checked in [0, N).
void read_ids(npz::ArrayReader& r, std::vector<std::int64_t>& ids, std::int64_t first,
              std::int64_t n, int side, std::int64_t num_nodes) {
  ids.resize(static_cast<std::size_t>(n));
  r.read_int64(ids.data(), n);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t id = ids[static_cast<std::size_t>(i)];
    TESSERA_CHECK(id >= 0 && id < num_nodes, InvalidInput, r.where(), ": edge ", first + i,
                  side == 0 ? " has source " : " has destination ", id, ", outside [0, ",
                  num_nodes, ")");
  }
}

std::vector<Edge> read_npz_edges(const npz::Archive& data, const Counts& c) {
  npz::ArrayReader r = open_edges(data, c.edges);
  std::vector<Edge> edges(static_cast<std::size_t>(c.edges));
  std::vector<std::int64_t> ids;
  for (int side = 0; side < 2; ++side) {
    for (std::int64_t first = 0; first < c.edges; first += kIdBlock) {
      const std::int64_t n = std::min(kIdBlock, c.edges - first);
      read_ids(r, ids, first, n, side, c.nodes);
      for (std::int64_t i = 0; i < n; ++i) {
        edges[static_cast<std::size_t>(first + i)][static_cast<std::size_t>(side)] =
            static_cast<NodeId>(ids[static_cast<std::size_t>(i)]);
      }
    }
  }
  return edges;
}

// node_feat (N, F).
npz::ArrayReader open_features(const npz::Archive& data, std::int64_t num_nodes,
                               const OgbFlags& flags) {
  npz::ArrayReader r = data.open("node_feat");
  const std::vector<std::int64_t>& shape = r.info().shape;
  TESSERA_CHECK(shape.size() == 2 && shape[0] == num_nodes, InvalidInput, r.where(), ": shape ",
                shape_text(shape), ", expected (", num_nodes, ", F) from num_nodes_list");
  TESSERA_CHECK(shape[1] <= kMaxFeatures, InvalidInput, r.where(), ": ", shape[1],
                " features per node is past the limit of ", kMaxFeatures);
  TESSERA_CHECK(!flags.num_features || *flags.num_features == shape[1], InvalidInput,
                flags.source, ": num_features = ", flags.num_features.value_or(0), ", but ",
                r.where(), " has ", shape[1], " features per node");
  return r;
}

// The next `rows` feature rows (node first..), checked finite.
void read_feature_rows(npz::ArrayReader& r, float* out, std::int64_t first, std::int64_t rows,
                       std::int64_t width) {
  r.read_f32(out, rows * width);
  for (std::int64_t i = 0; i < rows * width; ++i) {
    TESSERA_CHECK(std::isfinite(out[i]), InvalidInput, r.where(), ": node ", first + i / width,
                  " feature ", i % width, " is ", out[i], " (features must be finite)");
  }
}

// node-label.npz's node_label: (N,) or (N, 1) class ids as floats or integers (NaN: no label, as
// in the CSV layout), or (N, T) binary tasks (NaN: missing).
npz::ArrayReader open_labels(const npz::Archive& labels, const OgbFlags& flags,
                             std::int64_t num_nodes) {
  npz::ArrayReader r = labels.open("node_label");
  const std::vector<std::int64_t>& shape = r.info().shape;
  const std::int64_t width = flags.task == TaskType::MultiClass ? 1 : flags.num_tasks;
  TESSERA_CHECK(!shape.empty() && shape.size() <= 2 && shape[0] == num_nodes &&
                    (shape.size() == 1 ? 1 : shape[1]) == width,
                InvalidInput, r.where(), ": shape ", shape_text(shape), ", expected (", num_nodes,
                width == 1 ? ",) or (" + std::to_string(num_nodes) + ", 1)"
                           : ", " + std::to_string(width) + ")",
                " (", flags.source, ")");
  return r;
}

// `n` values of nodes first.. (MultiClass: one per node) as class ids, -1 for NaN.
void to_class_ids(const npz::ArrayReader& r, const double* values, std::int64_t first,
                  std::int64_t n, const OgbFlags& flags, std::int64_t* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double label = values[i];
    const bool missing = std::isnan(label);
    TESSERA_CHECK(missing || (label >= 0 && label < static_cast<double>(flags.num_classes) &&
                              label == std::floor(label)),
                  InvalidInput, r.where(), ": node ", first + i, " has label ", label,
                  ", not a class id in [0, ", flags.num_classes, ") or NaN (", flags.source, ")");
    out[i] = missing ? -1 : static_cast<std::int64_t>(label);
  }
}

// `n` values of elements first.. of the (N, T) targets: 0, 1 or NaN.
void to_targets(const npz::ArrayReader& r, const double* values, std::int64_t first,
                std::int64_t n, std::int64_t width, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double t = values[i];
    TESSERA_CHECK(std::isnan(t) || t == 0.0 || t == 1.0, InvalidInput, r.where(), ": node ",
                  (first + i) / width, " task ", (first + i) % width, " is ", t,
                  ", expected 0, 1 or NaN");
    out[i] = static_cast<float>(t);
  }
}

// raw/data.npz and raw/node-label.npz as an ArraySource.
class NpzSource final : public ogb::ArraySource {
 public:
  NpzSource(const fs::path& raw, const OgbFlags& flags)
      : data_(raw / "data.npz"), labels_file_(raw / "node-label.npz"), flags_(flags) {
    const Counts c = read_counts(data_, flags);
    num_nodes_ = c.nodes;
    num_edge_lines_ = c.edges;
  }

  // edge_index holds the E sources, then the E destinations: a second reader runs E ids ahead,
  // so that each edge's source and destination arrive together.
  void edges(const EdgeVisitor& visit) override {
    const std::int64_t edges = num_edge_lines_;
    npz::ArrayReader sources = open_edges(data_, edges);
    npz::ArrayReader destinations = open_edges(data_, edges);
    std::vector<std::int64_t> src, dst;
    for (std::int64_t first = 0; first < edges; first += kIdBlock) {  // skip the sources
      read_ids(destinations, dst, first, std::min(kIdBlock, edges - first), 0, num_nodes_);
    }
    for (std::int64_t first = 0; first < edges; first += kIdBlock) {
      const std::int64_t n = std::min(kIdBlock, edges - first);
      read_ids(sources, src, first, n, 0, num_nodes_);
      read_ids(destinations, dst, first, n, 1, num_nodes_);
      visit(src, dst);
    }
  }

  std::int64_t feature_width() override {
    return open_features(data_, num_nodes_, flags_).info().shape[1];
  }

  void features(std::int64_t block_rows, const FeatureVisitor& visit) override {
    npz::ArrayReader r = open_features(data_, num_nodes_, flags_);
    const std::int64_t width = r.info().shape[1];
    std::vector<float> rows(static_cast<std::size_t>(block_rows * width));
    for (std::int64_t first = 0; first < num_nodes_; first += block_rows) {
      const std::int64_t n = std::min(block_rows, num_nodes_ - first);
      read_feature_rows(r, rows.data(), first, n, width);
      visit(first, n, rows.data());
    }
  }

  void labels(std::int64_t block_nodes, const LabelVisitor& visit) override {
    const npz::Archive archive(labels_file_);
    npz::ArrayReader r = open_labels(archive, flags_, num_nodes_);
    const bool multiclass = flags_.task == TaskType::MultiClass;
    const std::int64_t width = multiclass ? 1 : flags_.num_tasks;
    std::vector<double> values;
    std::vector<std::int64_t> ids;
    std::vector<float> targets;
    for (std::int64_t first = 0; first < num_nodes_; first += block_nodes) {
      const std::int64_t n = std::min(block_nodes, num_nodes_ - first);
      values.resize(static_cast<std::size_t>(n * width));
      r.read_f64(values.data(), n * width);
      if (multiclass) {
        ids.resize(static_cast<std::size_t>(n));
        to_class_ids(r, values.data(), first, n, flags_, ids.data());
        visit(first, n, ids.data(), nullptr);
      } else {
        targets.resize(values.size());
        to_targets(r, values.data(), first * width, n * width, width, targets.data());
        visit(first, n, nullptr, targets.data());
      }
    }
  }

 private:
  npz::Archive data_;
  fs::path labels_file_;
  OgbFlags flags_;
};
}  // namespace

namespace ogb {

std::unique_ptr<ArraySource> open_npz_source(const fs::path& raw, const OgbFlags& flags) {
  return std::make_unique<NpzSource>(raw, flags);
}

// Labels first (they confirm the node count before the large arrays are allocated), then the
// edges and the features.
void read_npz_arrays(const fs::path& raw, const OgbFlags& flags, Dataset& dataset) {
  NpzSource source(raw, flags);
  read_labels(source, flags, dataset);
  const npz::Archive data(raw / "data.npz");
  const Counts counts{source.num_nodes(), source.num_edge_lines()};
  dataset.graph =
      csr_from_edges(counts.nodes, read_npz_edges(data, counts), flags.add_inverse_edge);
  dataset.num_edge_lines = counts.edges;
  if (flags.has_node_attr.value_or(true)) {
    npz::ArrayReader r = open_features(data, counts.nodes, flags);
    dataset.features = Tensor(counts.nodes, r.info().shape[1]);
    read_feature_rows(r, dataset.features.f32(), 0, counts.nodes, dataset.features.cols());
  } else {
    dataset.features = Tensor(counts.nodes, 0);
  }
}

}  // namespace ogb
}  // namespace tessera
