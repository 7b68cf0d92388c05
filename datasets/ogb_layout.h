// SPDX-License-Identifier: Apache-2.0
// Internal to datasets/: what the OGB folder readers share. ogb_raw_reader.cc reads the flags
// (meta.json or the built-in ogbn-* rows), the splits and the CSV layout; ogb_npz.cc reads the
// binary layout (raw/data.npz, raw/node-label.npz); both offer their arrays as an ArraySource,
// which ogb_convert.cc streams into Tessera HDF5 in bounded memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "datasets/dataset.h"

namespace tessera::ogb {

inline constexpr std::int64_t kMaxNodes = std::numeric_limits<NodeId>::max();

// The flags of one dataset (OGB's master.csv row, or meta.json).
struct OgbFlags {
  std::string source;  // where they came from, for messages
  bool add_inverse_edge = false;
  std::string split;   // empty: take the only split/<name>/
  TaskType task = TaskType::MultiClass;
  std::int64_t num_classes = 0;
  std::int64_t num_tasks = 1;
  std::string eval_metric;
  std::optional<bool> has_node_attr;
  std::optional<std::int64_t> num_nodes;     // optional cross-checks (meta.json written by us)
  std::optional<std::int64_t> num_features;
};

// OGB's binary layout: raw/data.npz without the CSV edges (raw = dir / "raw").
inline bool is_binary_layout(const std::filesystem::path& raw) {
  return std::filesystem::exists(raw / "data.npz") && !std::filesystem::exists(raw / "edge.csv.gz");
}

// ogb_raw_reader.cc: the folder's flags (a heterogeneous dataset refused); its name ("cora" for
// "../cora/"); the split files the flags name into dataset.{train,valid,test}_idx.
OgbFlags read_flags(const std::filesystem::path& dir);
std::string dataset_name(const std::filesystem::path& dir);
void read_splits(const std::filesystem::path& dir, const OgbFlags& flags, std::int64_t num_nodes,
                 Dataset& dataset);

// ogb_npz.cc: the binary layout's labels, graph and features into `dataset` (raw = dir / "raw").
void read_npz_arrays(const std::filesystem::path& raw, const OgbFlags& flags, Dataset& dataset);

// One pass at a time over the arrays of a folder's raw/ files, in blocks, every value checked
// with the messages read_ogb_raw gives: what read_ogb_raw reads into memory (the CSV layout) and
// what convert_ogb streams into HDF5 (both layouts). The counts are read and checked when the
// source opens; each call of edges(), features() or labels() is a new pass over its file.
class ArraySource {
 public:
  // A block of consecutive edge lines: the sources and the destinations, in [0, num_nodes()).
  using EdgeVisitor = std::function<void(std::span<const std::int64_t> sources,
                                         std::span<const std::int64_t> destinations)>;
  // `rows` feature rows of nodes first.., row-major, finite.
  using FeatureVisitor =
      std::function<void(std::int64_t first, std::int64_t rows, const float* values)>;
  // `n` nodes first..: class ids (-1: no label) of a multi-class dataset, or else the (n, T)
  // targets (0, 1 or NaN); the other pointer is null.
  using LabelVisitor = std::function<void(std::int64_t first, std::int64_t n,
                                          const std::int64_t* class_ids, const float* targets)>;

  virtual ~ArraySource() = default;
  std::int64_t num_nodes() const { return num_nodes_; }
  std::int64_t num_edge_lines() const { return num_edge_lines_; }
  virtual void edges(const EdgeVisitor& visit) = 0;
  // A source that parses text may keep the ids of its first edges() pass in `file` (8 bytes an
  // edge line) and read the later passes from it; the caller removes the file. Others ignore it.
  virtual void cache_edges(const std::filesystem::path& file) { (void)file; }
  // F, checked against the flags' num_features; only when the flags do not say has_node_attr
  // false.
  virtual std::int64_t feature_width() = 0;
  virtual void features(std::int64_t block_rows, const FeatureVisitor& visit) = 0;
  virtual void labels(std::int64_t block_nodes, const LabelVisitor& visit) = 0;

 protected:
  std::int64_t num_nodes_ = 0;
  std::int64_t num_edge_lines_ = 0;
};

// ogb_raw_reader.cc: the source's labels into dataset.labels or dataset.targets.
void read_labels(ArraySource& source, const OgbFlags& flags, Dataset& dataset);

// ogb_raw_reader.cc / ogb_npz.cc: the sources of the two layouts (raw = dir / "raw").
std::unique_ptr<ArraySource> open_csv_source(const std::filesystem::path& raw,
                                             const OgbFlags& flags, bool progress);
std::unique_ptr<ArraySource> open_npz_source(const std::filesystem::path& raw,
                                             const OgbFlags& flags);

}  // namespace tessera::ogb
