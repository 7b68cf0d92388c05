// SPDX-License-Identifier: Apache-2.0
// Entry points that turn a --dataset string into a Dataset, and the writers of each format.
// Formats: OGB raw layout directory (ogb_raw_reader.cc, ogb_raw_writer.cc), Tessera HDF5 file
// (hdf5_format.cc), synthetic presets (synthetic.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "datasets/dataset.h"

namespace tessera {
namespace hdf5 {
class Reader;
}

struct LoadOptions {
  bool progress = false;  // progress bar on stderr for long loads
};

// "synth:PRESET[:seed]" -> generate; a path ending in .h5 -> read_hdf5; a directory ->
// read_ogb_raw. Throws InvalidArgument for an unknown form, InvalidInput/Io from the readers.
Dataset load_dataset(const std::string& spec, const LoadOptions& options = {});
// Whether a dataset spec names a Tessera HDF5 file (a path ending in .h5), as load_dataset
// decides.
bool is_hdf5_spec(std::string_view spec);

// OGB raw layout (../shared/datasets/README.md): raw/*.csv.gz, split/<name>/*.csv.gz, with the
// dataset's flags from meta.json or the built-in ogbn-* master table.
Dataset read_ogb_raw(const std::filesystem::path& dir, const LoadOptions& options = {});
// Writes the raw layout plus meta.json. With dataset.add_inverse_edge, each undirected edge is
// written once (u < v) and the graph must be symmetric. Written to a temporary directory, then
// renamed into place.
void write_ogb_raw(const Dataset& dataset, const std::filesystem::path& dir);

// An OGB folder, in the CSV layout or in the binary one (raw/data.npz, raw/node-label.npz, as
// ogbn-papers100M ships), converted to Tessera HDF5 without holding the graph or the features:
// three passes over the edges (count the entries per block of rows, scatter them to bucket files
// beside `file`, sort each bucket into its rows; a CSV edge file is parsed once, its ids kept in
// a scratch file there), then the features, labels and splits copied a
// block at a time. The converter's buffers stay within about memory_bytes plus about 50 MiB of
// fixed blocks and bucket buffers, whatever the graph's size; what grows with it is O(N) bytes of
// split bookkeeping. The file holds the arrays and fingerprint of write_hdf5(read_ogb_raw(dir)),
// and every bad value is refused with read_ogb_raw's message; written to "<file>.tmp" and
// renamed, nothing left behind on failure. `progress` shows bars while the CSV files are read.
struct ConvertOptions {
  std::int64_t memory_bytes = std::int64_t{1} << 30;
  bool progress = false;
};
void convert_ogb(const std::filesystem::path& dir, const std::filesystem::path& file,
                 const ConvertOptions& options = {});

// Tessera's HDF5 dataset format: one file, datasets /graph/indptr, /graph/indices,
// /features, /labels or /targets, /split/{train,valid,test}, attributes for the flags.
void write_hdf5(const Dataset& dataset, const std::filesystem::path& file);
Dataset read_hdf5(const std::filesystem::path& file, const LoadOptions& options = {});
// Rows [row_begin, row_end) of a Tessera HDF5 dataset, read as hyperslabs: their stretch of
// /graph/indptr and /graph/indices, their feature rows and labels, and the split ids that fall
// among them; nothing else of the graph or the features is read. What one rank of many reads of
// a dataset too large for one process. Checked as read_hdf5 checks the whole (but the
// fingerprint, which needs everything: DatasetSlice::fingerprint is the file's attribute).
struct DatasetSlice {
  std::string name;
  TaskType task = TaskType::MultiClass;
  std::string eval_metric;
  std::int64_t num_classes = 0;
  std::int64_t num_tasks = 1;
  std::int64_t num_nodes = 0;  // of the whole graph
  std::int64_t row_begin = 0;
  std::int64_t row_end = 0;
  std::uint64_t fingerprint = 0;
  Csr rows;                          // (row_end - row_begin, num_nodes): global columns
  Tensor features;                   // (row_end - row_begin, F)
  std::vector<std::int64_t> labels;  // MultiClass, or
  Tensor targets;                    // MultiLabel (row_end - row_begin, T)
  std::vector<GlobalId> train_idx;   // global ids in [row_begin, row_end), in the file's order
  std::vector<GlobalId> valid_idx;
  std::vector<GlobalId> test_idx;
};
// Without `with_features` the slice's features are (rows, 0): what a partitioner needs.
DatasetSlice read_hdf5_rows(const std::filesystem::path& file, std::int64_t row_begin,
                            std::int64_t row_end, bool with_features = true);
// A Tessera HDF5 dataset without its feature matrix, for the rank that partitions a file whose
// ranks then read their own feature rows: everything else read and checked as read_hdf5 does,
// the features streamed once through the fingerprint check a block of rows at a time (never
// held); dataset.features is left (N, 0).
struct DatasetWithoutFeatures {
  Dataset dataset;
  std::int64_t num_features = 0;  // F of the file
  std::uint64_t fingerprint = 0;  // of the whole dataset, features included
};
DatasetWithoutFeatures read_hdf5_without_features(const std::filesystem::path& file,
                                                  const LoadOptions& options = {});
// Rows `ids` (dataset ids, any order) of a Tessera HDF5 file's features, in the order given,
// checked finite; the file must carry `expected_fingerprint` (the file the partitioning rank
// read). Reads only spans of rows that hold wanted ids, at most 16 MiB at a time.
Tensor read_hdf5_feature_rows(const std::filesystem::path& file, std::span<const GlobalId> ids,
                              std::uint64_t expected_fingerprint);
// A Tessera HDF5 dataset read without its arrays: its flags and sizes, its training ids, and
// its graph a stretch of rows at a time (checked as read_hdf5 checks them: sorted columns without
// repeats). What a planner reads of a file it does not load. The file stays open.
class Hdf5GraphReader {
 public:
  explicit Hdf5GraphReader(const std::filesystem::path& file);
  ~Hdf5GraphReader();
  Hdf5GraphReader(const Hdf5GraphReader&) = delete;
  Hdf5GraphReader& operator=(const Hdf5GraphReader&) = delete;

  const Dataset& flags() const { return flags_; }  // name, task, metric, classes; no arrays
  std::int64_t num_nodes() const { return num_nodes_; }
  std::int64_t num_entries() const { return num_entries_; }  // stored adjacency entries
  std::int64_t num_features() const { return num_features_; }
  std::uint64_t fingerprint() const { return fingerprint_; }  // the file's (0: none stored)
  std::vector<GlobalId> train_ids();
  // Rows [begin, end) of the graph: (end - begin, N), global columns.
  Csr rows(std::int64_t begin, std::int64_t end);
  // Where rows [begin, end] start in the stored entries (end - begin + 1 offsets; row N starts
  // at their count), and entry `entry`'s column.
  std::vector<EdgeOffset> row_starts(std::int64_t begin, std::int64_t end);
  NodeId column(EdgeOffset entry);

 private:
  std::unique_ptr<hdf5::Reader> in_;
  std::string label_;
  Dataset flags_;
  std::int64_t num_nodes_ = 0, num_entries_ = 0, num_features_ = 0;
  std::uint64_t fingerprint_ = 0;
};

// The same format from an in-memory file image (the bytes of a .h5 file); errors name `label`.
Dataset read_hdf5_image(std::span<const std::byte> image, const std::string& label);

}  // namespace tessera
