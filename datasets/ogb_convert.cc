// SPDX-License-Identifier: Apache-2.0
// convert_ogb: an OGB folder, in the CSV or the binary layout, into Tessera HDF5 without ever
// holding the graph or the features: three passes over the edges (count the entries per block
// of rows, scatter them to bucket files beside the output, sort each bucket into its rows), then
// the features, labels and splits copied a block at a time from the layout's ArraySource. The
// file holds the arrays and the fingerprint that write_hdf5(read_ogb_raw(dir)) gives.
#include <algorithm>
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
#include "datasets/ogb_layout.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ogb::ArraySource;
using ogb::OgbFlags;

constexpr std::int64_t kIdBlock = std::int64_t{1} << 20;  // indices per block read back

constexpr std::int64_t kFineBlocks = std::int64_t{1} << 16;  // row blocks counted in pass 1
constexpr std::size_t kMaxBuckets = 500;                     // bucket files open at once
constexpr std::size_t kBucketBuffer = std::size_t{1} << 12;  // entries buffered per bucket

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

// Pass 1 over the edges (every id checked): the entries of each block of plan.block_rows rows,
// one per edge into the row (and one per edge out of it with add_inverse_edge); then consecutive
// blocks grouped into buckets of at most max_bytes to sort (a block above it stands alone).
EdgePlan plan_edges(ArraySource& source, const fs::path& dir, bool inverse, std::int64_t max_bytes,
                    const fs::path& scratch) {
  EdgePlan plan;
  const std::int64_t nodes = source.num_nodes();
  plan.block_rows = std::max<std::int64_t>(1, (nodes + kFineBlocks - 1) / kFineBlocks);
  const std::int64_t blocks = (nodes + plan.block_rows - 1) / plan.block_rows;
  std::vector<std::int64_t> per_block(static_cast<std::size_t>(blocks), 0);
  auto count = [&](std::span<const std::int64_t> ids) {
    for (const std::int64_t id : ids) ++per_block[static_cast<std::size_t>(id / plan.block_rows)];
  };
  source.edges(
      [&](std::span<const std::int64_t> sources, std::span<const std::int64_t> destinations) {
        count(destinations);
        if (inverse) count(sources);
      });
  plan.bucket_of.resize(per_block.size());
  Bucket current;
  std::int64_t bytes = 0, total_bytes = 0;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t rows = std::min(plan.block_rows, nodes - b * plan.block_rows);
    const std::int64_t cost =
        per_block[static_cast<std::size_t>(b)] * kBytesPerEntry + rows * kBytesPerRow;
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
  current.row_end = nodes;
  plan.buckets.push_back(current);
  // Greedy grouping fills each bucket at least half (two neighbours never both fit one): twice
  // the total over the limit is enough.
  TESSERA_CHECK(plan.buckets.size() <= kMaxBuckets, InvalidArgument, "convert: a memory budget of ",
                (max_bytes * 2) >> 20, " MiB sorts the graph of ", dir.string(), " in ",
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
    TESSERA_CHECK(
        std::fwrite(buffer_.data(), sizeof(Entry), buffer_.size(), file_.get()) == buffer_.size(),
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

// Pass 2: every edge's entries into their buckets' files.
void scatter_entries(ArraySource& source, bool inverse, const EdgePlan& plan) {
  std::vector<BucketWriter> writers;
  writers.reserve(plan.buckets.size());
  for (const Bucket& bucket : plan.buckets) writers.emplace_back(bucket.file);
  auto bucket_of = [&](std::int64_t row) -> BucketWriter& {
    return writers[static_cast<std::size_t>(
        plan.bucket_of[static_cast<std::size_t>(row / plan.block_rows)])];
  };
  source.edges(
      [&](std::span<const std::int64_t> sources, std::span<const std::int64_t> destinations) {
        for (std::size_t i = 0; i < sources.size(); ++i) {
          const std::int64_t s = sources[i], d = destinations[i];
          bucket_of(d).add(make_entry(d, s));  // row d lists the sources of its in-edges
          if (inverse) bucket_of(s).add(make_entry(s, d));
        }
      });
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

// The features copied a block of rows at a time (at most a quarter of the budget).
void write_features(hdf5::Writer& out, ArraySource& source, const OgbFlags& flags,
                    std::int64_t memory_bytes, Hasher& hash) {
  const std::int64_t nodes = source.num_nodes();
  if (!flags.has_node_attr.value_or(true)) {
    out.create_array("/features", hdf5::kFloat32, nodes, 0, 2, false);
    hash.add_word(0);
    return;
  }
  const std::int64_t width = source.feature_width();
  out.create_array("/features", hdf5::kFloat32, nodes, width, 2, false);
  hash.add_word(static_cast<std::uint64_t>(width));
  if (nodes * width == 0) {  // still read: the rows must be there, and nothing more
    source.features(std::max<std::int64_t>(1, nodes),
                    [](std::int64_t, std::int64_t, const float*) {});
    return;
  }
  hash.begin_section(3, static_cast<std::uint64_t>(nodes * width));
  const std::int64_t block = std::clamp<std::int64_t>(memory_bytes / 4 / (4 * width), 1, nodes);
  source.features(block, [&](std::int64_t first, std::int64_t rows, const float* values) {
    out.write_rows("/features", hdf5::kFloat32, values, first, rows, width);
    hash.add_piece(std::span<const float>(values, static_cast<std::size_t>(rows * width)));
  });
  hash.end_section();
}

// The labels as /labels (class ids) or /targets, a block of nodes at a time; fingerprint
// sections 4 or 5 (NaN targets hashed as one canonical NaN, as fingerprint() does).
void write_labels(hdf5::Writer& out, ArraySource& source, const OgbFlags& flags, Hasher& hash) {
  const std::int64_t nodes = source.num_nodes();
  const bool multiclass = flags.task == TaskType::MultiClass;
  const std::int64_t width = multiclass ? 1 : flags.num_tasks;
  hash.add_word(multiclass ? 0 : 1);
  hash.add_word(static_cast<std::uint64_t>(multiclass ? flags.num_classes : flags.num_tasks));
  const char* path = multiclass ? "/labels" : "/targets";
  out.create_array(path, multiclass ? hdf5::kInt64 : hdf5::kFloat32, nodes, width,
                   multiclass ? 1 : 2, false);
  hash.begin_section(multiclass ? 4 : 5, static_cast<std::uint64_t>(nodes * width));
  std::vector<float> canonical;
  source.labels(
      std::max<std::int64_t>(1, kIdBlock / width),
      [&](std::int64_t first, std::int64_t n, const std::int64_t* class_ids, const float* targets) {
        if (class_ids) {
          out.write_rows(path, hdf5::kInt64, class_ids, first, n, 1);
          hash.add_piece(std::span<const std::int64_t>(class_ids, static_cast<std::size_t>(n)));
          return;
        }
        out.write_rows(path, hdf5::kFloat32, targets, first, n, width);
        canonical.assign(targets, targets + n * width);
        for (float& t : canonical) {
          if (std::isnan(t)) t = std::numeric_limits<float>::quiet_NaN();
        }
        hash.add_piece(std::span<const float>(canonical));
      });
  hash.end_section();
}

// The split files (small: node ids) as /split/*, fingerprint sections 6 to 8.
void write_splits(hdf5::Writer& out, const fs::path& dir, const OgbFlags& flags,
                  std::int64_t num_nodes, Hasher& hash) {
  Dataset splits;
  ogb::read_splits(dir, flags, num_nodes, splits);
  out.group("/split");
  std::uint64_t tag = 6;
  for (const auto& [path, ids] :
       {std::pair{"/split/train", &splits.train_idx}, std::pair{"/split/valid", &splits.valid_idx},
        std::pair{"/split/test", &splits.test_idx}}) {
    out.array(path, hdf5::kInt64, ids->data(), static_cast<std::int64_t>(ids->size()), 1, 1, false);
    hash.add_section(tag++, std::span<const GlobalId>(*ids));
  }
}

// Everything into `out`, in the fingerprint's order: the graph, the features, the labels, the
// splits.
void convert_into(const fs::path& dir, const OgbFlags& flags, hdf5::Writer& out,
                  const fs::path& scratch, const ConvertOptions& options) {
  const fs::path raw = dir / "raw";
  const std::unique_ptr<ArraySource> source =
      ogb::is_binary_layout(raw) ? ogb::open_npz_source(raw, flags)
                                 : ogb::open_csv_source(raw, flags, options.progress);
  const std::int64_t nodes = source->num_nodes();
  Dataset header;
  header.name = ogb::dataset_name(dir);
  header.task = flags.task;
  header.eval_metric = flags.eval_metric;
  header.num_classes = flags.num_classes;
  header.num_tasks = flags.num_tasks;
  header.add_inverse_edge = flags.add_inverse_edge;
  header.num_edge_lines = source->num_edge_lines();
  write_hdf5_flags(header, out);

  Hasher hash;
  hash.add_word(static_cast<std::uint64_t>(nodes));
  out.group("/graph");
  out.create_array("/graph/indptr", hdf5::kInt64, nodes + 1, 1, 1, false);
  out.create_array("/graph/indices", hdf5::kInt32, 0, 1, 1, true);
  source->cache_edges(scratch / "edges.bin");  // the second pass reads ids, not text
  const EdgePlan plan =
      plan_edges(*source, dir, flags.add_inverse_edge, options.memory_bytes / 2, scratch);
  scatter_entries(*source, flags.add_inverse_edge, plan);
  const std::int64_t nnz = write_graph(out, plan, nodes, hash);
  hash_indices(out, nnz, hash);
  write_features(out, *source, flags, options.memory_bytes, hash);
  write_labels(out, *source, flags, hash);
  write_splits(out, dir, flags, nodes, hash);
  out.attribute("fingerprint", hash.finish());
}

}  // namespace

void convert_ogb(const fs::path& dir, const fs::path& file, const ConvertOptions& options) {
  hdf5::silence();
  TESSERA_CHECK(options.memory_bytes >= 4096, InvalidArgument, "convert: a memory budget of ",
                options.memory_bytes, " bytes is too small (at least 4096)");
  TESSERA_CHECK(fs::is_directory(dir), Io, dir.string(), ": dataset directory not found");
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

}  // namespace tessera
