// SPDX-License-Identifier: Apache-2.0
// write_ogb_raw: Dataset -> OGB raw CSV layout (raw/*.csv.gz, split/public/*.csv.gz, meta.json,
// RELEASE_v1.txt) that read_ogb_raw (and OGB's own pandas reader) read back to the same arrays.
// Deterministic bytes; floats in their shortest round-trip form; everything goes to a temporary
// sibling directory first, renamed into place only when complete. Relies on gzip_stream, json.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "datasets/gzip_stream.h"
#include "datasets/loaders.h"
#include "core/error.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSplitName = "public";

// Removes a half-written temporary directory unless the write was committed.
class TempDirGuard {
 public:
  explicit TempDirGuard(fs::path path) : path_(std::move(path)) {}
  ~TempDirGuard() {
    if (!committed_) {
      std::error_code ignored;
      fs::remove_all(path_, ignored);
    }
  }
  TempDirGuard(const TempDirGuard&) = delete;
  TempDirGuard& operator=(const TempDirGuard&) = delete;
  void commit() { committed_ = true; }

 private:
  fs::path path_;
  bool committed_ = false;
};

void append_int(std::string& out, std::int64_t value) {
  char text[24];
  auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  out.append(text, end);
}

// Shortest text that reads back (decimal -> double -> float, as the reader and pandas do) to
// the same bits; integral values get ".0" so that pandas types the column as float.
void append_float(std::string& out, float value) {
  char text[64];
  auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  double reread = 0.0;
  std::from_chars(text, end, reread);
  float back = detail::narrow_to_float(reread);
  if (std::memcmp(&back, &value, sizeof value) != 0) {  // double rounding: write the double
    end = std::to_chars(text, text + sizeof text, static_cast<double>(value)).ptr;
  }
  out.append(text, end);
  if (std::all_of(text, end, [](char c) { return c == '-' || (c >= '0' && c <= '9'); })) {
    out.append(".0");
  }
}

void write_count_file(const fs::path& file, std::int64_t count) {
  GzipWriter writer(file);
  append_int(writer.buffer(), count);
  writer.buffer().push_back('\n');
  writer.close();
}

// Is the entry (row, col) present? Columns are sorted within each row.
bool has_entry(const Csr& graph, std::int64_t row, NodeId col) {
  const NodeId* begin = graph.indices().data() + graph.indptr()[row];
  const NodeId* end = graph.indices().data() + graph.indptr()[row + 1];
  return std::binary_search(begin, end, col);
}

// edge.csv.gz; returns the number of lines. Symmetric graphs (add_inverse_edge) are written one
// line "u,v" per undirected edge with u <= v; others one line "src,dst" per CSR entry.
std::int64_t write_edges(const Dataset& dataset, const fs::path& file) {
  const Csr& graph = dataset.graph;
  const auto& indptr = graph.indptr();
  const auto& indices = graph.indices();
  GzipWriter writer(file);
  std::string& out = writer.buffer();
  std::int64_t lines = 0;
  for (std::int64_t row = 0; row < graph.num_rows(); ++row) {
    for (EdgeOffset e = indptr[row]; e < indptr[row + 1]; ++e) {
      NodeId col = indices[e];
      if (dataset.add_inverse_edge) {
        TESSERA_CHECK(has_entry(graph, col, static_cast<NodeId>(row)), InvalidArgument,
                      "write_ogb_raw: dataset '", dataset.name,
                      "' has add_inverse_edge = true but its graph is not symmetric: edge ", col,
                      " -> ", row, " has no reverse");
        if (col < row) continue;
        append_int(out, row);
        out.push_back(',');
        append_int(out, col);
      } else {
        append_int(out, col);
        out.push_back(',');
        append_int(out, row);
      }
      out.push_back('\n');
      ++lines;
      writer.maybe_flush();
    }
  }
  writer.close();
  return lines;
}

void write_features(const Tensor& features, const fs::path& file) {
  GzipWriter writer(file);
  std::string& out = writer.buffer();
  for (std::int64_t r = 0; r < features.rows(); ++r) {
    const float* row = features.row<float>(r);
    for (std::int64_t c = 0; c < features.cols(); ++c) {
      if (c) out.push_back(',');
      append_float(out, row[c]);
    }
    out.push_back('\n');
    writer.maybe_flush();
  }
  writer.close();
}

void write_labels(const Dataset& dataset, const fs::path& file) {
  GzipWriter writer(file);
  std::string& out = writer.buffer();
  if (dataset.task == TaskType::MultiClass) {
    for (std::int64_t label : dataset.labels) {
      if (label < 0) {
        out.append("nan");
      } else {
        append_int(out, label);
      }
      out.push_back('\n');
      writer.maybe_flush();
    }
  } else {
    const Tensor& targets = dataset.targets;
    for (std::int64_t r = 0; r < targets.rows(); ++r) {
      const float* row = targets.row<float>(r);
      for (std::int64_t c = 0; c < targets.cols(); ++c) {
        if (c) out.push_back(',');
        out.append(std::isnan(row[c]) ? "nan" : row[c] == 1.0f ? "1" : "0");
      }
      out.push_back('\n');
      writer.maybe_flush();
    }
  }
  writer.close();
}

void write_ids(const std::vector<GlobalId>& ids, const fs::path& file) {
  GzipWriter writer(file);
  std::string& out = writer.buffer();
  for (GlobalId id : ids) {
    append_int(out, id);
    out.push_back('\n');
    writer.maybe_flush();
  }
  writer.close();
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
  out.close();
  TESSERA_CHECK(out, Io, file.string(), ": write failed");
}

std::string meta_json(const Dataset& dataset, std::int64_t edge_lines) {
  nlohmann::ordered_json meta;
  bool multiclass = dataset.task == TaskType::MultiClass;
  meta["name"] = dataset.name;
  meta["num_nodes"] = dataset.num_nodes();
  meta["num_edge_lines"] = edge_lines;
  meta["num_edges_directed"] = dataset.graph.nnz();
  meta["num_features"] = dataset.num_features();
  meta["num_classes"] = dataset.num_classes;
  meta["num_tasks"] = multiclass ? 1 : dataset.num_tasks;
  meta["task_type"] = multiclass ? "multiclass classification" : "binary classification";
  meta["eval_metric"] = dataset.eval_metric;
  meta["add_inverse_edge"] = dataset.add_inverse_edge;
  meta["has_node_attr"] = dataset.num_features() > 0;
  meta["has_edge_attr"] = false;
  meta["split"] = kSplitName;
  meta["split_sizes"] = {{"train", dataset.train_idx.size()},
                         {"valid", dataset.valid_idx.size()},
                         {"test", dataset.test_idx.size()}};
  meta["is_hetero"] = false;
  meta["binary"] = false;
  return meta.dump(2) + "\n";
}

// The directory to write into next to `dir`, unique within this process and across processes.
fs::path temporary_sibling(const fs::path& dir) {
  static std::atomic<unsigned> counter{0};
  return dir.parent_path() / ("." + dir.filename().string() + ".tmp-" + std::to_string(getpid()) +
                              "-" + std::to_string(counter.fetch_add(1)));
}

}  // namespace

void write_ogb_raw(const Dataset& dataset, const fs::path& dir_in) {
  fs::path dir = fs::absolute(dir_in).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "out/" spelled with a slash
  validate(dataset, "write_ogb_raw(" + dir.string() + ")");
  TESSERA_CHECK(dataset.task == TaskType::MultiClass || dataset.eval_metric == "rocauc",
                InvalidArgument, "write_ogb_raw: multi-label dataset '", dataset.name,
                "' with eval_metric '", dataset.eval_metric, "' (expected rocauc)");
  TESSERA_CHECK(dataset.task == TaskType::MultiLabel || dataset.eval_metric == "acc",
                InvalidArgument, "write_ogb_raw: multiclass dataset '", dataset.name,
                "' with eval_metric '", dataset.eval_metric, "' (expected acc)");
  std::error_code ec;
  bool exists = fs::exists(dir, ec);
  TESSERA_CHECK(!exists || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)), Io, dir.string(),
                ": already exists and is not an empty directory; remove it or choose another path");
  fs::create_directories(dir.parent_path(), ec);
  TESSERA_CHECK(!ec, Io, dir.parent_path().string(), ": cannot create (", ec.message(), ")");

  fs::path tmp = temporary_sibling(dir);
  TempDirGuard guard(tmp);
  fs::create_directories(tmp / "raw", ec);
  if (!ec) fs::create_directories(tmp / "split" / kSplitName, ec);
  TESSERA_CHECK(!ec, Io, tmp.string(), ": cannot create (", ec.message(), ")");

  const fs::path raw = tmp / "raw";
  std::int64_t edge_lines = write_edges(dataset, raw / "edge.csv.gz");
  write_count_file(raw / "num-node-list.csv.gz", dataset.num_nodes());
  write_count_file(raw / "num-edge-list.csv.gz", edge_lines);
  if (dataset.num_features() > 0) write_features(dataset.features, raw / "node-feat.csv.gz");
  write_labels(dataset, raw / "node-label.csv.gz");
  const fs::path split = tmp / "split" / kSplitName;
  write_ids(dataset.train_idx, split / "train.csv.gz");
  write_ids(dataset.valid_idx, split / "valid.csv.gz");
  write_ids(dataset.test_idx, split / "test.csv.gz");
  write_text(tmp / "meta.json", meta_json(dataset, edge_lines));
  write_text(tmp / "RELEASE_v1.txt", "Written by Tessera write_ogb_raw (OGB raw layout, v1)\n");

  if (exists) fs::remove(dir, ec);  // the empty directory that was there
  fs::rename(tmp, dir, ec);
  TESSERA_CHECK(!ec, Io, dir.string(), ": cannot move the written dataset into place (",
                ec.message(), ")");
  guard.commit();
}

}  // namespace tessera
