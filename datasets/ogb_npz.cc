// SPDX-License-Identifier: Apache-2.0
// OGB's binary layout, as ogbn-papers100M ships: raw/data.npz (edge_index (2, E), node_feat
// (N, F), num_nodes_list, num_edges_list) and raw/node-label.npz (node_label, NaN for no label),
// splits as in the CSV layout. read_npz_arrays reads it into memory; convert_ogb_npz writes it to
// Tessera HDF5 without ever holding the graph or the features (bounded buffers, edges sorted by
// row through bucket files on disk). Both check every array the same way and give the same
// arrays and fingerprint.
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

void read_npz_labels(const fs::path& file, const OgbFlags& flags, std::int64_t num_nodes,
                     Dataset& dataset) {
  npz::Archive archive(file);
  npz::ArrayReader r = open_labels(archive, flags, num_nodes);
  const std::int64_t total = r.info().count();
  std::vector<double> values(static_cast<std::size_t>(total));
  r.read_f64(values.data(), total);
  if (flags.task == TaskType::MultiClass) {
    dataset.labels.resize(static_cast<std::size_t>(num_nodes));
    to_class_ids(r, values.data(), 0, total, flags, dataset.labels.data());
  } else {
    dataset.targets = Tensor(num_nodes, flags.num_tasks);
    to_targets(r, values.data(), 0, total, flags.num_tasks, dataset.targets.f32());
  }
}

// ---- convert_ogb_npz ----

constexpr std::int64_t kFineBlocks = std::int64_t{1} << 16;  // row blocks counted in pass 1
constexpr std::size_t kMaxBuckets = 500;                      // bucket files open at once
constexpr std::size_t kBucketBuffer = std::size_t{1} << 12;   // entries buffered per bucket

// A (row, column) entry of the CSR as the bucket files hold it: the row in the high 32 bits, so
// that sorting the words sorts by row, then by column.
using Entry = std::uint64_t;
Entry make_entry(std::int64_t row, std::int64_t column) {
  return (static_cast<Entry>(row) << 32) | static_cast<Entry>(column);
}

// The rows [row_begin, row_end) whose entries are sorted together, from a file on disk.
struct Bucket {
  std::int64_t row_begin = 0;
  std::int64_t row_end = 0;
  std::int64_t entries = 0;
  fs::path file;
};

// What sorting a bucket holds at once: per entry the entry (8 bytes) and its column (4); per row
// its indptr entry (8).
constexpr std::int64_t kBytesPerEntry = 12;
constexpr std::int64_t kBytesPerRow = 8;

struct EdgePlan {
  std::int64_t block_rows = 1;          // rows per counted block
  std::vector<std::int32_t> bucket_of;  // per block
  std::vector<Bucket> buckets;
};

// Pass 1 over edge_index (every id checked): the entries of each block of plan.block_rows rows,
// one per edge into the row (and one per edge out of it with add_inverse_edge); then consecutive
// blocks grouped into buckets of at most max_bytes to sort (a block above it stands alone).
EdgePlan plan_edges(const npz::Archive& data, const Counts& c, bool inverse,
                    std::int64_t max_bytes, const fs::path& scratch) {
  EdgePlan plan;
  plan.block_rows = std::max<std::int64_t>(1, (c.nodes + kFineBlocks - 1) / kFineBlocks);
  const std::int64_t blocks = (c.nodes + plan.block_rows - 1) / plan.block_rows;
  std::vector<std::int64_t> per_block(static_cast<std::size_t>(blocks), 0);
  npz::ArrayReader r = open_edges(data, c.edges);
  std::vector<std::int64_t> ids;
  for (int side = 0; side < 2; ++side) {
    for (std::int64_t first = 0; first < c.edges; first += kIdBlock) {
      const std::int64_t n = std::min(kIdBlock, c.edges - first);
      read_ids(r, ids, first, n, side, c.nodes);
      if (side == 1 || inverse) {
        for (const std::int64_t id : ids) {
          ++per_block[static_cast<std::size_t>(id / plan.block_rows)];
        }
      }
    }
  }
  plan.bucket_of.resize(per_block.size());
  Bucket current;
  std::int64_t bytes = 0, total_bytes = 0;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t rows = std::min(plan.block_rows, c.nodes - b * plan.block_rows);
    const std::int64_t cost = per_block[static_cast<std::size_t>(b)] * kBytesPerEntry +
                              rows * kBytesPerRow;
    total_bytes += cost;
    if (bytes > 0 && bytes + cost > max_bytes) {
      current.row_end = b * plan.block_rows;
      plan.buckets.push_back(current);
      const std::int64_t next = current.row_end;
      current = Bucket();
      current.row_begin = next;
      bytes = 0;
    }
    bytes += cost;
    current.entries += per_block[static_cast<std::size_t>(b)];
    plan.bucket_of[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(plan.buckets.size());
  }
  current.row_end = c.nodes;
  plan.buckets.push_back(current);
  // Greedy grouping fills each bucket at least half (two neighbours never both fit one): twice
  // the total over the limit is enough.
  TESSERA_CHECK(plan.buckets.size() <= kMaxBuckets, InvalidArgument, "convert: a memory budget of ",
                (max_bytes * 2) >> 20, " MiB sorts the graph of ", data.path(), " in ",
                plan.buckets.size(), " buckets (at most ", kMaxBuckets, "); give it at least ",
                ((4 * total_bytes / static_cast<std::int64_t>(kMaxBuckets)) >> 20) + 1, " MiB");
  for (std::size_t i = 0; i < plan.buckets.size(); ++i) {
    plan.buckets[i].file = scratch / ("bucket_" + std::to_string(i) + ".bin");
  }
  return plan;
}

// Buffered appends of entries to one bucket's file.
class BucketWriter {
 public:
  explicit BucketWriter(const fs::path& file)
      : file_(std::fopen(file.c_str(), "wb"), &std::fclose), path_(file) {
    TESSERA_CHECK(file_, Io, path_.string(), ": cannot create a sorting bucket");
    buffer_.reserve(kBucketBuffer);
  }
  void add(Entry entry) {
    buffer_.push_back(entry);
    if (buffer_.size() == kBucketBuffer) flush();
  }
  void flush() {
    TESSERA_CHECK(std::fwrite(buffer_.data(), sizeof(Entry), buffer_.size(), file_.get()) ==
                      buffer_.size(),
                  Io, path_.string(), ": cannot write (disk full?)");
    buffer_.clear();
  }
  void close() {
    flush();
    TESSERA_CHECK(std::fclose(file_.release()) == 0, Io, path_.string(), ": cannot close");
  }

 private:
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  fs::path path_;
  std::vector<Entry> buffer_;
};

// Pass 2: every edge's entries into their buckets' files; a second reader of edge_index runs
// E ids ahead, so that each edge's source and destination arrive together.
void scatter_entries(const npz::Archive& data, const Counts& c, bool inverse,
                     const EdgePlan& plan) {
  npz::ArrayReader sources = open_edges(data, c.edges);
  npz::ArrayReader destinations = open_edges(data, c.edges);
  std::vector<std::int64_t> src, dst;
  for (std::int64_t first = 0; first < c.edges; first += kIdBlock) {  // skip the sources
    read_ids(destinations, dst, first, std::min(kIdBlock, c.edges - first), 0, c.nodes);
  }
  std::vector<BucketWriter> writers;
  writers.reserve(plan.buckets.size());
  for (const Bucket& bucket : plan.buckets) writers.emplace_back(bucket.file);
  auto bucket_of = [&](std::int64_t row) -> BucketWriter& {
    return writers[static_cast<std::size_t>(
        plan.bucket_of[static_cast<std::size_t>(row / plan.block_rows)])];
  };
  for (std::int64_t first = 0; first < c.edges; first += kIdBlock) {
    const std::int64_t n = std::min(kIdBlock, c.edges - first);
    read_ids(sources, src, first, n, 0, c.nodes);
    read_ids(destinations, dst, first, n, 1, c.nodes);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t s = src[static_cast<std::size_t>(i)], d = dst[static_cast<std::size_t>(i)];
      bucket_of(d).add(make_entry(d, s));  // row d lists the sources of its in-edges
      if (inverse) bucket_of(s).add(make_entry(s, d));
    }
  }
  for (BucketWriter& writer : writers) writer.close();
}

// Pass 3: each bucket sorted (duplicates dropped) into its rows of /graph/indptr and the next
// stretch of /graph/indices; indptr is hashed as it goes (section 1 of the fingerprint).
// Returns the number of entries.
std::int64_t write_graph(hdf5::Writer& out, const EdgePlan& plan, std::int64_t num_nodes,
                         Hasher& hash) {
  hash.begin_section(1, static_cast<std::uint64_t>(num_nodes + 1));
  const EdgeOffset zero = 0;
  out.write_rows("/graph/indptr", hdf5::kInt64, &zero, 0, 1, 1);
  hash.add_piece(std::span<const EdgeOffset>(&zero, 1));
  std::int64_t nnz = 0;
  std::vector<Entry> entries;
  std::vector<EdgeOffset> indptr;
  std::vector<NodeId> columns;
  for (const Bucket& bucket : plan.buckets) {
    entries.resize(static_cast<std::size_t>(bucket.entries));
    {
      std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(bucket.file.c_str(), "rb"),
                                                         &std::fclose);
      TESSERA_CHECK(in && std::fread(entries.data(), sizeof(Entry), entries.size(), in.get()) ==
                              entries.size(),
                    Io, bucket.file.string(), ": cannot read back the sorting bucket");
    }
    fs::remove(bucket.file);
    std::sort(entries.begin(), entries.end());
    entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
    indptr.assign(static_cast<std::size_t>(bucket.row_end - bucket.row_begin), 0);
    columns.resize(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      ++indptr[static_cast<std::size_t>(static_cast<std::int64_t>(entries[i] >> 32) -
                                        bucket.row_begin)];
      columns[i] = static_cast<NodeId>(entries[i] & 0xFFFFFFFFu);
    }
    EdgeOffset end = nnz;
    for (EdgeOffset& row : indptr) row = end += row;  // each row's end offset
    out.write_rows("/graph/indptr", hdf5::kInt64, indptr.data(), bucket.row_begin + 1,
                   static_cast<std::int64_t>(indptr.size()), 1);
    hash.add_piece(std::span<const EdgeOffset>(indptr));
    out.write_rows("/graph/indices", hdf5::kInt32, columns.data(), nnz,
                   static_cast<std::int64_t>(columns.size()), 1);
    nnz += static_cast<std::int64_t>(columns.size());
  }
  hash.end_section();
  return nnz;
}

// /graph/indices read back in blocks: section 2 of the fingerprint (its length is known now).
void hash_indices(hdf5::Writer& out, std::int64_t nnz, Hasher& hash) {
  hash.begin_section(2, static_cast<std::uint64_t>(nnz));
  std::vector<NodeId> block;
  for (std::int64_t first = 0; first < nnz; first += kIdBlock) {
    block.resize(static_cast<std::size_t>(std::min(kIdBlock, nnz - first)));
    out.read_rows("/graph/indices", hdf5::kInt32, block.data(), first,
                  static_cast<std::int64_t>(block.size()), 1);
    hash.add_piece(std::span<const NodeId>(block));
  }
  hash.end_section();
}

// node_feat copied a block of rows at a time (at most a quarter of the budget).
void write_features(hdf5::Writer& out, const npz::Archive& data, const Counts& c,
                    const OgbFlags& flags, std::int64_t memory_bytes, Hasher& hash) {
  if (!flags.has_node_attr.value_or(true)) {
    out.create_array("/features", hdf5::kFloat32, c.nodes, 0, 2, false);
    hash.add_word(0);
    return;
  }
  npz::ArrayReader r = open_features(data, c.nodes, flags);
  const std::int64_t width = r.info().shape[1];
  out.create_array("/features", hdf5::kFloat32, c.nodes, width, 2, false);
  hash.add_word(static_cast<std::uint64_t>(width));
  if (c.nodes * width == 0) return;
  hash.begin_section(3, static_cast<std::uint64_t>(c.nodes * width));
  const std::int64_t block = std::clamp<std::int64_t>(memory_bytes / 4 / (4 * width), 1, c.nodes);
  std::vector<float> rows(static_cast<std::size_t>(block * width));
  for (std::int64_t first = 0; first < c.nodes; first += block) {
    const std::int64_t n = std::min(block, c.nodes - first);
    read_feature_rows(r, rows.data(), first, n, width);
    out.write_rows("/features", hdf5::kFloat32, rows.data(), first, n, width);
    hash.add_piece(std::span<const float>(rows.data(), static_cast<std::size_t>(n * width)));
  }
  hash.end_section();
}

// node_label as /labels (class ids) or /targets, a block of nodes at a time; fingerprint
// sections 4 or 5 (NaN targets hashed as one canonical NaN, as fingerprint() does).
void write_labels(hdf5::Writer& out, const fs::path& file, const OgbFlags& flags,
                  std::int64_t num_nodes, Hasher& hash) {
  const npz::Archive archive(file);
  npz::ArrayReader r = open_labels(archive, flags, num_nodes);
  const bool multiclass = flags.task == TaskType::MultiClass;
  const std::int64_t width = multiclass ? 1 : flags.num_tasks;
  hash.add_word(multiclass ? 0 : 1);
  hash.add_word(static_cast<std::uint64_t>(multiclass ? flags.num_classes : flags.num_tasks));
  const char* path = multiclass ? "/labels" : "/targets";
  out.create_array(path, multiclass ? hdf5::kInt64 : hdf5::kFloat32, num_nodes, width,
                   multiclass ? 1 : 2, false);
  hash.begin_section(multiclass ? 4 : 5, static_cast<std::uint64_t>(num_nodes * width));
  const std::int64_t block = std::max<std::int64_t>(1, kIdBlock / width);
  std::vector<double> values;
  std::vector<std::int64_t> ids;
  std::vector<float> targets;
  for (std::int64_t first = 0; first < num_nodes; first += block) {
    const std::int64_t n = std::min(block, num_nodes - first);
    values.resize(static_cast<std::size_t>(n * width));
    r.read_f64(values.data(), n * width);
    if (multiclass) {
      ids.resize(static_cast<std::size_t>(n));
      to_class_ids(r, values.data(), first, n, flags, ids.data());
      out.write_rows(path, hdf5::kInt64, ids.data(), first, n, 1);
      hash.add_piece(std::span<const std::int64_t>(ids));
    } else {
      targets.resize(values.size());
      to_targets(r, values.data(), first * width, n * width, width, targets.data());
      out.write_rows(path, hdf5::kFloat32, targets.data(), first, n, width);
      for (float& t : targets) {
        if (std::isnan(t)) t = std::numeric_limits<float>::quiet_NaN();
      }
      hash.add_piece(std::span<const float>(targets));
    }
  }
  hash.end_section();
}

// The split files (small: node ids) as /split/*, fingerprint sections 6 to 8.
void write_splits(hdf5::Writer& out, const fs::path& dir, const OgbFlags& flags,
                  std::int64_t num_nodes, Hasher& hash) {
  Dataset splits;
  ogb::read_splits(dir, flags, num_nodes, splits);
  out.group("/split");
  std::uint64_t tag = 6;
  for (const auto& [path, ids] : {std::pair{"/split/train", &splits.train_idx},
                                  std::pair{"/split/valid", &splits.valid_idx},
                                  std::pair{"/split/test", &splits.test_idx}}) {
    out.array(path, hdf5::kInt64, ids->data(), static_cast<std::int64_t>(ids->size()), 1, 1,
              false);
    hash.add_section(tag++, std::span<const GlobalId>(*ids));
  }
}

// Everything into `out`, in the fingerprint's order: the graph, the features, the labels, the
// splits.
void convert_into(const fs::path& dir, const OgbFlags& flags, hdf5::Writer& out,
                  const fs::path& scratch, const ConvertOptions& options) {
  const fs::path raw = dir / "raw";
  const npz::Archive data(raw / "data.npz");
  const Counts c = read_counts(data, flags);
  Dataset header;
  header.name = ogb::dataset_name(dir);
  header.task = flags.task;
  header.eval_metric = flags.eval_metric;
  header.num_classes = flags.num_classes;
  header.num_tasks = flags.num_tasks;
  header.add_inverse_edge = flags.add_inverse_edge;
  header.num_edge_lines = c.edges;
  write_hdf5_flags(header, out);

  Hasher hash;
  hash.add_word(static_cast<std::uint64_t>(c.nodes));
  out.group("/graph");
  out.create_array("/graph/indptr", hdf5::kInt64, c.nodes + 1, 1, 1, false);
  out.create_array("/graph/indices", hdf5::kInt32, 0, 1, 1, true);
  const EdgePlan plan =
      plan_edges(data, c, flags.add_inverse_edge, options.memory_bytes / 2, scratch);
  scatter_entries(data, c, flags.add_inverse_edge, plan);
  const std::int64_t nnz = write_graph(out, plan, c.nodes, hash);
  hash_indices(out, nnz, hash);
  write_features(out, data, c, flags, options.memory_bytes, hash);
  write_labels(out, raw / "node-label.npz", flags, c.nodes, hash);
  write_splits(out, dir, flags, c.nodes, hash);
  out.attribute("fingerprint", hash.finish());
}

}  // namespace

void convert_ogb_npz(const fs::path& dir, const fs::path& file, const ConvertOptions& options) {
  hdf5::silence();
  TESSERA_CHECK(options.memory_bytes >= 4096, InvalidArgument,
                "convert: a memory budget of ", options.memory_bytes,
                " bytes is too small (at least 4096)");
  TESSERA_CHECK(fs::is_directory(dir), Io, dir.string(), ": dataset directory not found");
  TESSERA_CHECK(fs::exists(dir / "raw" / "data.npz"), Io, (dir / "raw" / "data.npz").string(),
                ": not found (the folder is not in OGB's binary layout)");
  TESSERA_CHECK(!fs::exists(dir / "raw" / "edge.csv.gz"), InvalidArgument, dir.string(),
                ": raw/edge.csv.gz is there, so the folder reads as OGB's CSV layout; convert it "
                "by loading it (tessera_data convert does)");
  const OgbFlags flags = ogb::read_flags(dir);
  const fs::path temporary = file.string() + ".tmp", scratch = file.string() + ".buckets";
  auto clean = [&] {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    fs::remove_all(scratch, ignored);
  };
  try {
    if (file.has_parent_path()) fs::create_directories(file.parent_path());
    fs::remove_all(scratch);
    fs::create_directories(scratch);
    {
      hdf5::Writer out(temporary, file.string());
      convert_into(dir, flags, out, scratch, options);
      out.close();
    }
    fs::remove_all(scratch);
    fs::rename(temporary, file);
  } catch (const fs::filesystem_error& error) {
    clean();
    TESSERA_FAIL(Io, file.string(), ": ", error.code().message(), " (", error.what(), ")");
  } catch (...) {
    clean();
    throw;
  }
}

namespace ogb {

// Labels first (they confirm the node count before the large arrays are allocated), then the
// edges and the features.
void read_npz_arrays(const fs::path& raw, const OgbFlags& flags, Dataset& dataset) {
  const npz::Archive data(raw / "data.npz");
  const Counts counts = read_counts(data, flags);
  read_npz_labels(raw / "node-label.npz", flags, counts.nodes, dataset);
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
