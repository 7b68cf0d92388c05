// SPDX-License-Identifier: Apache-2.0
// Tessera's HDF5 dataset format (write_hdf5 / read_hdf5) on the hdf5_io layer: one file with
// /graph/indptr, /graph/indices, /features, /labels or /targets, /split/{train,valid,test} and
// the dataset's flags as attributes of "/". Files are written to "<file>.tmp" and renamed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/fuzzing.h"
#include "core/hash.h"
#include "datasets/hdf5_format.h"
#include "datasets/hdf5_io.h"
#include "datasets/loaders.h"
#include "datasets/progress.h"

namespace tessera {
namespace {

using hdf5::kFloat32;
using hdf5::kInt32;
using hdf5::kInt64;

constexpr const char* kFormatName = "tessera-dataset";
constexpr std::int64_t kFormatVersion = 1;

void check_writable(const Dataset& d) {
  const std::int64_t n = d.num_nodes();
  const bool no_features = d.features.rows() == 0 && d.features.cols() == 0;
  TESSERA_CHECK(no_features || (d.features.dtype() == DType::F32 && d.features.rows() == n),
                InvalidArgument, "write_hdf5: features must be f32 with ", n, " rows, got ",
                to_string(d.features.dtype()), " ", d.features.shape_string());
  if (d.task == TaskType::MultiClass) {
    TESSERA_CHECK(static_cast<std::int64_t>(d.labels.size()) == n, InvalidArgument,
                  "write_hdf5: expected ", n, " labels, got ", d.labels.size());
  } else {
    TESSERA_CHECK(d.targets.dtype() == DType::F32 && d.targets.rows() == n, InvalidArgument,
                  "write_hdf5: targets must be f32 with ", n, " rows, got ",
                  to_string(d.targets.dtype()), " ", d.targets.shape_string());
  }
}

}  // namespace

// Layout (format "tessera-dataset", version 1). Attributes of "/": format, name, task
// ("multiclass" | "multilabel"), eval_metric (strings); format_version, num_classes, num_tasks,
// add_inverse_edge (0/1), num_edge_lines (int64); fingerprint (uint64, see dataset.h).
// Datasets: /graph/indptr int64 (N + 1), /graph/indices int32 (nnz), /features float32 (N, F)
// chunked by rows (about 4 MiB per chunk, no filter), /labels int64 (N) or /targets float32
// (N, T), /split/{train,valid,test} int64. All little-endian.
void write_hdf5_flags(const Dataset& d, hdf5::Writer& out) {
  out.attribute("format", std::string(kFormatName));
  out.attribute("format_version", kFormatVersion);
  out.attribute("name", d.name);
  out.attribute("task", std::string(to_string(d.task)));
  out.attribute("eval_metric", d.eval_metric);
  out.attribute("num_classes", d.num_classes);
  out.attribute("num_tasks", d.num_tasks);
  out.attribute("add_inverse_edge", std::int64_t{d.add_inverse_edge ? 1 : 0});
  out.attribute("num_edge_lines", d.num_edge_lines);
}

namespace {

void write_contents(const Dataset& d, hdf5::Writer& out) {
  write_hdf5_flags(d, out);
  out.attribute("fingerprint", fingerprint(d));

  const Csr& g = d.graph;
  out.group("/graph");
  out.array("/graph/indptr", kInt64, g.indptr().data(), g.num_rows() + 1, 1, 1, false);
  out.array("/graph/indices", kInt32, g.indices().data(), g.nnz(), 1, 1, false);
  const Tensor& x = d.features;
  out.array("/features", kFloat32, x.empty() ? nullptr : x.raw(), x.rows(), x.cols(), 2, true);
  if (d.task == TaskType::MultiClass) {
    out.array("/labels", kInt64, d.labels.data(), static_cast<std::int64_t>(d.labels.size()), 1, 1,
              false);
  } else {
    const Tensor& y = d.targets;
    out.array("/targets", kFloat32, y.empty() ? nullptr : y.raw(), y.rows(), y.cols(), 2, true);
  }
  out.group("/split");
  auto split = [&](const char* path, const std::vector<GlobalId>& ids) {
    out.array(path, kInt64, ids.data(), static_cast<std::int64_t>(ids.size()), 1, 1, false);
  };
  split("/split/train", d.train_idx);
  split("/split/valid", d.valid_idx);
  split("/split/test", d.test_idx);
}

void read_flags(hdf5::Reader& in, const std::string& label, Dataset& d) {
  TESSERA_CHECK(in.has_attribute("format"), InvalidInput, label,
                ": not a Tessera dataset (no 'format' attribute on /)");
  const std::string format = in.string_attribute("format");
  TESSERA_CHECK(format == kFormatName, InvalidInput, label, ": not a Tessera dataset (format '",
                format, "', expected '", kFormatName, "')");
  const auto version = in.int64_attribute("format_version");
  TESSERA_CHECK(version == kFormatVersion, InvalidInput, label, ": format version ", version,
                " is not supported (this build reads version ", kFormatVersion, ")");
  d.name = in.string_attribute("name");
  const std::string task = in.string_attribute("task");
  TESSERA_CHECK(task == "multiclass" || task == "multilabel", InvalidInput, label,
                ": attribute 'task' is '", task, "', expected 'multiclass' or 'multilabel'");
  d.task = task == "multiclass" ? TaskType::MultiClass : TaskType::MultiLabel;
  d.eval_metric = in.string_attribute("eval_metric");
  TESSERA_CHECK(d.eval_metric == "acc" || d.eval_metric == "rocauc", InvalidInput, label,
                ": attribute 'eval_metric' is '", d.eval_metric, "', expected 'acc' or 'rocauc'");
  d.num_classes = in.int64_attribute("num_classes");
  d.num_tasks = in.int64_attribute("num_tasks");
  d.add_inverse_edge = in.int64_attribute("add_inverse_edge") != 0;
  d.num_edge_lines = in.int64_attribute("num_edge_lines");
}

}  // namespace

void write_hdf5(const Dataset& dataset, const std::filesystem::path& file) {
  hdf5::silence();
  check_writable(dataset);
  const std::filesystem::path temporary = file.string() + ".tmp";
  try {
    if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
    hdf5::Writer out(temporary, file.string());
    write_contents(dataset, out);
    out.close();
    std::filesystem::rename(temporary, file);
  } catch (const std::filesystem::filesystem_error& error) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    TESSERA_FAIL(Io, file.string(), ": ", error.code().message(), " (", error.what(), ")");
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

namespace {

constexpr std::int64_t kFeatureBlockBytes = std::int64_t{16} << 20;  // per read of rows

// The column count of /features, whose rows are checked: n, or none at all (0, 0).
std::int64_t feature_width(hdf5::Reader& in, std::int64_t n) {
  const auto [rows, width] = in.shape("/features", kFloat32, 2);
  TESSERA_CHECK(rows == n || (rows == 0 && width == 0), InvalidInput, in.where("/features"),
                ": expected ", n, " rows, found ", rows);
  return width;
}

// /features streamed a block of rows at a time: visit(first row, rows, values).
void for_feature_blocks(
    hdf5::Reader& in, std::int64_t rows, std::int64_t width,
    const std::function<void(std::int64_t, std::int64_t, const float*)>& visit) {
  if (rows * width == 0) return;
  const std::int64_t block = std::max<std::int64_t>(1, kFeatureBlockBytes / (4 * width));
  std::vector<float> values(static_cast<std::size_t>(std::min(block, rows) * width));
  for (std::int64_t first = 0; first < rows; first += block) {
    const std::int64_t n = std::min(block, rows - first);
    in.read_rows("/features", kFloat32, values.data(), first, n, width);
    visit(first, n, values.data());
  }
}

// The fingerprint of `d` with its features in the file (d.features not read): streamed through
// the hasher, each value checked finite.
std::uint64_t fingerprint_streaming_features(hdf5::Reader& in, const Dataset& d,
                                             std::int64_t width) {
  return fingerprint(d, width, [&](Hasher& hasher) {
    for_feature_blocks(
        in, d.num_nodes(), width, [&](std::int64_t first, std::int64_t n, const float* values) {
          for (std::int64_t i = 0; i < n * width; ++i) {
            TESSERA_CHECK(std::isfinite(values[i]), InvalidInput, in.where("/features"), ": node ",
                          first + i / width, " feature ", i % width, " is not finite");
          }
          hasher.add_piece(std::span<const float>(values, static_cast<std::size_t>(n * width)));
        });
  });
}

// With `features` false, /features is not read into d.features (left (N, 0)) but streamed
// through the fingerprint check; `width` gets its column count.
Dataset read_contents(hdf5::Reader& in, const std::string& label, const LoadOptions& options,
                      bool features = true, std::int64_t* width = nullptr) {
  Dataset d;
  read_flags(in, label, d);

  // Shapes first (so that the progress bar knows the total), then the data.
  const std::int64_t n = in.shape("/graph/indptr", kInt64, 1).first - 1;
  TESSERA_CHECK(n >= 0, InvalidInput, label, ": /graph/indptr: expected at least 1 entry");
  const std::int64_t nnz = in.shape("/graph/indices", kInt32, 1).first;
  const std::int64_t feature_cols = feature_width(in, n);
  if (width) *width = feature_cols;
  std::uint64_t total = static_cast<std::uint64_t>(n + 1) * 8 + nnz * 4 +
                        (features ? n * feature_cols * 4 : 0) + n * 8;
  in.start_progress(total, options.progress);

  std::vector<EdgeOffset> indptr = in.vector<EdgeOffset>("/graph/indptr", kInt64, n + 1);
  std::vector<NodeId> indices = in.vector<NodeId>("/graph/indices", kInt32, nnz);
  try {
    d.graph = Csr(n, n, std::move(indptr), std::move(indices));
  } catch (const Error& error) {
    TESSERA_FAIL(InvalidInput, label, ": /graph: ", error.message());
  }
  d.features = features ? in.matrix("/features", n) : Tensor(n, 0);
  if (d.task == TaskType::MultiClass) {
    d.labels = in.vector<std::int64_t>("/labels", kInt64, n);
  } else {
    d.targets = in.matrix("/targets", n);
  }
  d.train_idx = in.vector<GlobalId>("/split/train", kInt64, -1);
  d.valid_idx = in.vector<GlobalId>("/split/valid", kInt64, -1);
  d.test_idx = in.vector<GlobalId>("/split/test", kInt64, -1);
  in.finish_progress();

  validate(d, label);
  if (in.has_attribute("fingerprint")) {
    const auto stored = in.uint64_attribute("fingerprint");
    const std::uint64_t computed =
        features ? fingerprint(d) : fingerprint_streaming_features(in, d, feature_cols);
    TESSERA_CHECK(stored == computed || !kVerifyChecksums, InvalidInput, label,
                  ": fingerprint mismatch (attribute ", fingerprint_hex(stored), ", contents give ",
                  fingerprint_hex(computed),
                  "): the file is corrupt or was modified after writing");
  }
  return d;
}

}  // namespace

namespace {

// The split ids of `path` in [begin, end).
std::vector<GlobalId> split_ids_in(hdf5::Reader& in, const char* path, std::int64_t num_nodes,
                                   std::int64_t begin, std::int64_t end) {
  std::vector<GlobalId> ids = in.vector<GlobalId>(path, kInt64, -1);
  for (const GlobalId id : ids) {
    TESSERA_CHECK(id >= 0 && id < num_nodes, InvalidInput, in.where(path), ": node id ", id,
                  " is outside [0, ", num_nodes, ")");
  }
  std::erase_if(ids, [&](GlobalId id) { return id < begin || id >= end; });
  return ids;
}

// The rows' stretch of the CSR, rebased to start at 0, columns checked by Csr.
Csr read_csr_rows(hdf5::Reader& in, const std::string& label, std::int64_t n, std::int64_t begin,
                  std::int64_t end) {
  const std::int64_t nnz = in.shape("/graph/indices", kInt32, 1).first;
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(end - begin + 1));
  in.read_rows("/graph/indptr", kInt64, indptr.data(), begin, end - begin + 1, 1);
  const EdgeOffset first = indptr.front(), last = indptr.back();
  TESSERA_CHECK(first >= 0 && first <= last && last <= nnz, InvalidInput, label,
                ": /graph/indptr: rows ", begin, "..", end, " span entries ", first, "..", last,
                " of ", nnz);
  for (EdgeOffset& offset : indptr) offset -= first;
  std::vector<NodeId> indices(static_cast<std::size_t>(last - first));
  in.read_rows("/graph/indices", kInt32, indices.data(), first, last - first, 1);
  try {
    Csr rows(end - begin, n, std::move(indptr), std::move(indices));
    for (std::int64_t r = 0; r < rows.num_rows(); ++r) {
      for (EdgeOffset e = rows.indptr()[r] + 1; e < rows.indptr()[r + 1]; ++e) {
        TESSERA_CHECK(rows.indices()[e - 1] < rows.indices()[e], InvalidInput, "graph row ",
                      begin + r, " has columns ", rows.indices()[e - 1], ", ", rows.indices()[e],
                      " (expected sorted columns without duplicates)");
      }
    }
    return rows;
  } catch (const Error& error) {
    TESSERA_FAIL(InvalidInput, label, ": /graph: ", error.message());
  }
}

}  // namespace

namespace {

// InvalidArgument unless [begin, end) is a range of a file's `nodes` rows.
void check_row_range(const std::string& label, std::int64_t begin, std::int64_t end,
                     std::int64_t nodes) {
  TESSERA_CHECK(0 <= begin && begin <= end && end <= nodes, InvalidArgument, label, ": rows ",
                begin, "..", end, " are not a range of its ", nodes, " nodes");
}

}  // namespace

DatasetSlice read_hdf5_rows(const std::filesystem::path& file, std::int64_t row_begin,
                            std::int64_t row_end, bool with_features) {
  hdf5::silence();
  const std::string label = file.string();
  hdf5::Reader in(file, label);
  Dataset flags;
  read_flags(in, label, flags);
  DatasetSlice s;
  s.name = flags.name;
  s.task = flags.task;
  s.eval_metric = flags.eval_metric;
  s.num_classes = flags.num_classes;
  s.num_tasks = flags.num_tasks;
  s.num_nodes = in.shape("/graph/indptr", kInt64, 1).first - 1;
  check_row_range(label, row_begin, row_end, s.num_nodes);
  s.row_begin = row_begin;
  s.row_end = row_end;
  if (in.has_attribute("fingerprint")) s.fingerprint = in.uint64_attribute("fingerprint");
  const std::int64_t rows = row_end - row_begin;
  s.rows = read_csr_rows(in, label, s.num_nodes, row_begin, row_end);
  const std::int64_t width = with_features ? feature_width(in, s.num_nodes) : 0;
  s.features = Tensor(rows, width);
  if (s.features.numel() > 0) {
    in.read_rows("/features", kFloat32, s.features.raw(), row_begin, rows, width);
  }
  for (std::int64_t i = 0; i < s.features.numel(); ++i) {
    TESSERA_CHECK(std::isfinite(s.features.f32()[i]), InvalidInput, in.where("/features"),
                  ": node ", row_begin + i / width, " feature ", i % width, " is not finite");
  }
  if (s.task == TaskType::MultiClass) {
    s.labels.resize(static_cast<std::size_t>(rows));
    const std::int64_t label_rows = in.shape("/labels", kInt64, 1).first;
    TESSERA_CHECK(label_rows == s.num_nodes, InvalidInput, in.where("/labels"), ": expected ",
                  s.num_nodes, " entries, found ", label_rows);
    in.read_rows("/labels", kInt64, s.labels.data(), row_begin, rows, 1);
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t y = s.labels[static_cast<std::size_t>(i)];
      TESSERA_CHECK(y == -1 || (y >= 0 && y < s.num_classes), InvalidInput, in.where("/labels"),
                    ": node ", row_begin + i, " has label ", y, ", outside [0, ", s.num_classes,
                    ") and not -1");
    }
  } else {
    const auto [target_rows, tasks] = in.shape("/targets", kFloat32, 2);
    TESSERA_CHECK(target_rows == s.num_nodes && tasks == s.num_tasks, InvalidInput,
                  in.where("/targets"), ": expected (", s.num_nodes, ", ", s.num_tasks,
                  "), found (", target_rows, ", ", tasks, ")");
    s.targets = Tensor(rows, tasks);
    if (s.targets.numel() > 0) {
      in.read_rows("/targets", kFloat32, s.targets.raw(), row_begin, rows, tasks);
    }
    for (std::int64_t i = 0; i < s.targets.numel(); ++i) {
      const float t = s.targets.f32()[i];
      TESSERA_CHECK(std::isnan(t) || t == 0.0f || t == 1.0f, InvalidInput, in.where("/targets"),
                    ": node ", row_begin + i / tasks, " task ", i % tasks, " is ", t,
                    ", expected 0, 1 or NaN");
    }
  }
  s.train_idx = split_ids_in(in, "/split/train", s.num_nodes, row_begin, row_end);
  s.valid_idx = split_ids_in(in, "/split/valid", s.num_nodes, row_begin, row_end);
  s.test_idx = split_ids_in(in, "/split/test", s.num_nodes, row_begin, row_end);
  return s;
}

Dataset read_hdf5(const std::filesystem::path& file, const LoadOptions& options) {
  hdf5::silence();
  hdf5::Reader in(file, file.string());
  return read_contents(in, file.string(), options);
}

DatasetWithoutFeatures read_hdf5_without_features(const std::filesystem::path& file,
                                                  const LoadOptions& options) {
  hdf5::silence();
  hdf5::Reader in(file, file.string());
  DatasetWithoutFeatures out;
  out.dataset = read_contents(in, file.string(), options, false, &out.num_features);
  out.fingerprint = in.has_attribute("fingerprint")
                        ? in.uint64_attribute("fingerprint")
                        : fingerprint_streaming_features(in, out.dataset, out.num_features);
  return out;
}

Hdf5GraphReader::Hdf5GraphReader(const std::filesystem::path& file)
    : in_((hdf5::silence(), std::make_unique<hdf5::Reader>(file, file.string()))),
      label_(file.string()) {
  read_flags(*in_, label_, flags_);
  num_nodes_ = in_->shape("/graph/indptr", kInt64, 1).first - 1;
  TESSERA_CHECK(num_nodes_ >= 0, InvalidInput, in_->where("/graph/indptr"), ": empty");
  num_entries_ = in_->shape("/graph/indices", kInt32, 1).first;
  num_features_ = feature_width(*in_, num_nodes_);
  if (in_->has_attribute("fingerprint")) fingerprint_ = in_->uint64_attribute("fingerprint");
}

Hdf5GraphReader::~Hdf5GraphReader() = default;

std::vector<GlobalId> Hdf5GraphReader::train_ids() {
  return split_ids_in(*in_, "/split/train", num_nodes_, 0, num_nodes_);
}

Csr Hdf5GraphReader::rows(std::int64_t begin, std::int64_t end) {
  check_row_range(label_, begin, end, num_nodes_);
  return read_csr_rows(*in_, label_, num_nodes_, begin, end);
}

std::vector<EdgeOffset> Hdf5GraphReader::row_starts(std::int64_t begin, std::int64_t end) {
  check_row_range(label_, begin, end, num_nodes_);
  std::vector<EdgeOffset> starts(static_cast<std::size_t>(end - begin + 1));
  in_->read_rows("/graph/indptr", kInt64, starts.data(), begin, end - begin + 1, 1);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::int64_t row = begin + static_cast<std::int64_t>(i);
    TESSERA_CHECK(starts[i] >= 0 && starts[i] <= num_entries_, InvalidInput,
                  in_->where("/graph/indptr"), ": row ", row, " starts at entry ", starts[i],
                  " of ", num_entries_);
    TESSERA_CHECK(i == 0 || starts[i - 1] <= starts[i], InvalidInput, in_->where("/graph/indptr"),
                  ": row ", row, " starts at entry ", starts[i], ", before row ", row - 1, " (at ",
                  starts[i - 1], ")");
  }
  return starts;
}

NodeId Hdf5GraphReader::column(EdgeOffset entry) {
  TESSERA_CHECK(0 <= entry && entry < num_entries_, InvalidArgument, label_, ": entry ", entry,
                " outside [0, ", num_entries_, ")");
  NodeId column = 0;
  in_->read_rows("/graph/indices", kInt32, &column, entry, 1, 1);
  TESSERA_CHECK(column >= 0 && column < num_nodes_, InvalidInput, in_->where("/graph/indices"),
                ": entry ", entry, " is node ", column, ", outside [0, ", num_nodes_, ")");
  return column;
}

Tensor read_hdf5_feature_rows(const std::filesystem::path& file, std::span<const GlobalId> ids,
                              std::uint64_t expected_fingerprint) {
  hdf5::silence();
  const std::string label = file.string();
  hdf5::Reader in(file, label);
  Dataset flags;
  read_flags(in, label, flags);
  const std::int64_t n = in.shape("/graph/indptr", kInt64, 1).first - 1;
  const std::int64_t width = feature_width(in, n);
  const bool stored = in.has_attribute("fingerprint");
  TESSERA_CHECK(stored && in.uint64_attribute("fingerprint") == expected_fingerprint, InvalidInput,
                label, ": fingerprint ",
                stored ? fingerprint_hex(in.uint64_attribute("fingerprint")) : "(none)",
                ", expected ", fingerprint_hex(expected_fingerprint),
                " (the file was replaced while the job read it?)");
  Tensor out(static_cast<std::int64_t>(ids.size()), width);
  if (out.numel() == 0) return out;
  // The ids by value: each read covers the wanted rows of at most one block's span.
  std::vector<std::size_t> order(ids.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return ids[a] < ids[b]; });
  for (const GlobalId id : ids) {
    TESSERA_CHECK(id >= 0 && id < n, InvalidArgument, label, ": feature row ", id,
                  " asked for, outside [0, ", n, ")");
  }
  const std::int64_t block = std::max<std::int64_t>(1, kFeatureBlockBytes / (4 * width));
  std::vector<float> values;
  for (std::size_t i = 0; i < order.size();) {
    const GlobalId first = ids[order[i]];
    std::size_t j = i;
    while (j < order.size() && ids[order[j]] < first + block) ++j;
    const std::int64_t span_rows = ids[order[j - 1]] - first + 1;
    values.resize(static_cast<std::size_t>(span_rows * width));
    in.read_rows("/features", kFloat32, values.data(), first, span_rows, width);
    for (; i < j; ++i) {
      const float* row = values.data() + (ids[order[i]] - first) * width;
      for (std::int64_t c = 0; c < width; ++c) {
        TESSERA_CHECK(std::isfinite(row[c]), InvalidInput, in.where("/features"), ": node ",
                      ids[order[i]], " feature ", c, " is not finite");
      }
      std::copy(row, row + width, out.row<float>(static_cast<std::int64_t>(order[i])));
    }
  }
  return out;
}

Dataset read_hdf5_image(std::span<const std::byte> image, const std::string& label) {
  hdf5::Reader in(image, label);
  return read_contents(in, label, {});
}

}  // namespace tessera
