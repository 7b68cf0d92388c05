// SPDX-License-Identifier: Apache-2.0
// Internal to datasets/: what the OGB folder readers share. ogb_raw_reader.cc reads the flags
// (meta.json or the built-in ogbn-* rows), the splits and the CSV layout; ogb_npz.cc reads the
// binary layout (raw/data.npz, raw/node-label.npz) into memory and converts it to Tessera HDF5
// in bounded memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
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

// ogb_raw_reader.cc: the folder's flags; its name ("cora" for "../cora/"); the split files the
// flags name into dataset.{train,valid,test}_idx.
OgbFlags read_flags(const std::filesystem::path& dir);
std::string dataset_name(const std::filesystem::path& dir);
void read_splits(const std::filesystem::path& dir, const OgbFlags& flags, std::int64_t num_nodes,
                 Dataset& dataset);

// ogb_npz.cc: the binary layout's labels, graph and features into `dataset` (raw = dir / "raw").
void read_npz_arrays(const std::filesystem::path& raw, const OgbFlags& flags, Dataset& dataset);

}  // namespace tessera::ogb
