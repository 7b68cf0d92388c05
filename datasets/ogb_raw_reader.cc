// SPDX-License-Identifier: Apache-2.0
// read_ogb_raw: an OGB node-property dataset in the raw CSV layout (../shared/datasets/README.md)
// -> Dataset. Flags come from meta.json or the built-in ogbn-* master rows; files are streamed
// through GzipLineReader and every malformed value is refused with "<file>:<line>: <what>".
// Relies on gzip_stream (zlib), nlohmann-json and OpenMP (per-row sort of the CSR).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "datasets/gzip_stream.h"
#include "datasets/loaders.h"
#include "datasets/ogb_layout.h"
#include "core/error.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using Edge = std::array<NodeId, 2>;  // (source, destination) as listed in edge.csv.gz
using ogb::kMaxNodes;
using ogb::OgbFlags;

constexpr std::int64_t kReserveCap = std::int64_t{1} << 24;  // never trust a count for memory


// ---- flags ----

// The folder's own name, also for "cora/", "." or "../cora".
std::string folder_name(const fs::path& dir) {
  fs::path normal = fs::absolute(dir).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  return normal.filename().string();
}

std::optional<OgbFlags> builtin_flags(const fs::path& dir) {
  std::string name = folder_name(dir);
  std::replace(name.begin(), name.end(), '-', '_');
  auto multiclass = [&](std::int64_t classes, bool inverse, const char* split) {
    OgbFlags flags;
    flags.source = "built-in OGB master table row for " + name;
    flags.add_inverse_edge = inverse;
    flags.split = split;
    flags.num_classes = classes;
    flags.eval_metric = "acc";
    flags.has_node_attr = true;
    return flags;
  };
  if (name == "ogbn_arxiv") return multiclass(40, false, "time");
  if (name == "ogbn_products") return multiclass(47, true, "sales_ranking");
  if (name == "ogbn_proteins") {
    OgbFlags flags = multiclass(2, true, "species");
    flags.task = TaskType::MultiLabel;
    flags.num_tasks = 112;
    flags.eval_metric = "rocauc";
    flags.has_node_attr = false;
    return flags;
  }
  if (name == "ogbn_papers100M") return multiclass(172, false, "time");  // raw/*.npz
  if (name == "ogbn_mag") {
    TESSERA_FAIL(InvalidInput, dir.string(),
                 ": ogbn-mag is a heterogeneous graph, which this reader does not support");
  }
  return std::nullopt;
}

const nlohmann::json* find_key(const nlohmann::json& meta, const char* key) {
  auto it = meta.find(key);
  return it == meta.end() || it->is_null() ? nullptr : &*it;
}

bool json_bool(const nlohmann::json& meta, const char* key, const std::string& file) {
  const nlohmann::json* value = find_key(meta, key);
  TESSERA_CHECK(value, InvalidInput, file, ": missing key '", key, "'");
  if (value->is_boolean()) return value->get<bool>();
  if (value->is_string()) {  // master.csv spelling
    const std::string& text = value->get_ref<const std::string&>();
    if (text == "True" || text == "true") return true;
    if (text == "False" || text == "false") return false;
  }
  TESSERA_FAIL(InvalidInput, file, ": key '", key, "' must be true or false, found ", value->dump());
}

std::string json_string(const nlohmann::json& meta, const char* key, const std::string& file) {
  const nlohmann::json* value = find_key(meta, key);
  TESSERA_CHECK(value, InvalidInput, file, ": missing key '", key, "'");
  TESSERA_CHECK(value->is_string(), InvalidInput, file, ": key '", key, "' must be a string, found ",
                value->dump());
  return value->get<std::string>();
}

// A count from meta.json, in [minimum, maximum], before anything is sized by it.
std::int64_t json_count(const nlohmann::json& value, const char* key, const std::string& file,
                        std::int64_t minimum, std::int64_t maximum) {
  TESSERA_CHECK(value.is_number_integer() && value.get<std::int64_t>() >= minimum &&
                    value.get<std::int64_t>() <= maximum,
                InvalidInput, file, ": key '", key, "' must be an integer in [", minimum, ", ",
                maximum, "], found ", value.dump());
  return value.get<std::int64_t>();
}

OgbFlags flags_from_meta(const fs::path& meta_path) {
  const std::string file = meta_path.string();
  std::ifstream in(meta_path);
  TESSERA_CHECK(in, Io, file, ": cannot open");
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    TESSERA_FAIL(InvalidInput, file, ": not valid JSON (", error.what(), ")");
  }
  TESSERA_CHECK(meta.is_object(), InvalidInput, file, ": expected a JSON object, found ",
                meta.type_name());
  for (const char* key : {"is_hetero", "is hetero"}) {
    if (find_key(meta, key)) {
      TESSERA_CHECK(!json_bool(meta, key, file), InvalidInput, file, ": '", key,
                    "' is true: heterogeneous OGB datasets are not supported");
    }
  }
  OgbFlags flags;
  flags.source = file;
  flags.add_inverse_edge = json_bool(meta, "add_inverse_edge", file);
  if (find_key(meta, "split")) flags.split = json_string(meta, "split", file);
  std::string task_type = json_string(meta, "task_type", file);
  flags.eval_metric = json_string(meta, "eval_metric", file);
  const nlohmann::json* classes = find_key(meta, "num_classes");
  const nlohmann::json* tasks = find_key(meta, "num_tasks");
  if (task_type == "multiclass classification") {
    flags.task = TaskType::MultiClass;
    TESSERA_CHECK(classes, InvalidInput, file, ": missing key 'num_classes' (needed for task_type '",
                  task_type, "')");
    flags.num_classes = json_count(*classes, "num_classes", file, 1, kMaxOutputs);
    if (tasks) {
      TESSERA_CHECK(json_count(*tasks, "num_tasks", file, 1, kMaxOutputs) == 1, InvalidInput, file,
                    ": num_tasks = ", tasks->dump(),
                    ": multiclass datasets with several tasks are not supported");
    }
    TESSERA_CHECK(flags.eval_metric == "acc", InvalidInput, file, ": eval_metric '",
                  flags.eval_metric, "' does not fit task_type '", task_type, "' (expected acc)");
  } else if (task_type == "binary classification") {
    flags.task = TaskType::MultiLabel;
    TESSERA_CHECK(tasks, InvalidInput, file, ": missing key 'num_tasks' (needed for task_type '",
                  task_type, "')");
    flags.num_tasks = json_count(*tasks, "num_tasks", file, 1, kMaxOutputs);
    flags.num_classes = classes ? json_count(*classes, "num_classes", file, 0, kMaxOutputs) : 2;
    TESSERA_CHECK(flags.eval_metric == "rocauc", InvalidInput, file, ": eval_metric '",
                  flags.eval_metric, "' does not fit task_type '", task_type,
                  "' (expected rocauc)");
  } else {
    TESSERA_FAIL(InvalidInput, file, ": task_type '", task_type,
                 "' is not supported (expected 'multiclass classification' or "
                 "'binary classification')");
  }
  if (find_key(meta, "has_node_attr")) flags.has_node_attr = json_bool(meta, "has_node_attr", file);
  if (const nlohmann::json* value = find_key(meta, "num_nodes")) {
    flags.num_nodes = json_count(*value, "num_nodes", file, 0, kMaxNodes);
  }
  if (const nlohmann::json* value = find_key(meta, "num_features")) {
    flags.num_features = json_count(*value, "num_features", file, 0, kMaxFeatures);
  }
  return flags;
}

OgbFlags flags_of_folder(const fs::path& dir) {
  fs::path meta = dir / "meta.json";
  if (fs::exists(meta)) return flags_from_meta(meta);
  if (std::optional<OgbFlags> flags = builtin_flags(dir)) return *flags;
  TESSERA_FAIL(Io, meta.string(),
               ": not found, and the folder name is not one of the built-in OGB datasets "
               "(ogbn_arxiv, ogbn_products, ogbn_proteins, ogbn_papers100M); add a meta.json with "
               "add_inverse_edge, split, num_classes or num_tasks, task_type and eval_metric");
}

// ---- one file each ----

// The rows of a fast-path failure: integers parsed field by field (spaces, '+'), or the error.
void parse_int_fields(const GzipLineReader& reader, std::string_view line, std::int64_t* out,
                      std::int64_t count) {
  bool ok = count_fields(line) == count;
  for (std::int64_t c = 0; ok && c < count; ++c) ok = parse_int64(field_at(line, c), out[c]);
  TESSERA_CHECK(ok, InvalidInput, reader.where(), ": ", describe_bad_row(line, count, true));
}

// num-node-list.csv.gz / num-edge-list.csv.gz: one line (one graph), one count.
std::int64_t read_count_file(const fs::path& file, const char* what) {
  GzipLineReader reader(file);
  std::string_view line;
  std::int64_t value = -1;
  std::int64_t lines = 0;
  while (reader.next_record(line)) {
    TESSERA_CHECK(++lines == 1, InvalidInput, reader.where(),
                  ": a second line; node-property datasets hold exactly one graph");
    parse_int_fields(reader, line, &value, 1);
    TESSERA_CHECK(value >= 0, InvalidInput, reader.where(), ": negative ", what, " ", value);
  }
  TESSERA_CHECK(lines == 1, InvalidInput, reader.where(), ": empty file (expected one line: the ",
                what, ")");
  return value;
}

// ---- the CSV layout's arrays, one line at a time ----

constexpr std::int64_t kLineBlock = std::int64_t{1} << 16;  // lines per visited block

// An edge line "src,dst" with both ids in [0, N).
void parse_edge(const GzipLineReader& reader, std::string_view line, std::int64_t num_nodes,
                std::int64_t* ends) {
  if (!parse_int_row(line, ends, 2)) parse_int_fields(reader, line, ends, 2);
  for (int c = 0; c < 2; ++c) {
    TESSERA_CHECK(ends[c] >= 0 && ends[c] < num_nodes, InvalidInput, reader.where(), ": ",
                  c == 0 ? "source" : "destination", " node id ", ends[c], " is outside [0, ",
                  num_nodes, ")");
  }
}

// A feature line of `width` floats, all finite; "<file>:<line>: column c: <what>" otherwise.
void parse_feature_row(const GzipLineReader& reader, std::string_view line, std::int64_t width,
                       float* row) {
  if (!parse_float_row(line, row, width)) {
    bool ok = count_fields(line) == width;
    for (std::int64_t c = 0; ok && c < width; ++c) ok = parse_float(field_at(line, c), row[c]);
    TESSERA_CHECK(ok, InvalidInput, reader.where(), ": ", describe_bad_row(line, width, false));
  }
  bool all_finite = true;
  for (std::int64_t c = 0; c < width; ++c) all_finite &= std::isfinite(row[c]);
  if (all_finite) return;
  for (std::int64_t c = 0; c < width; ++c) {
    TESSERA_CHECK(std::isfinite(row[c]), InvalidInput, reader.where(), ": column ", c + 1, ": '",
                  field_at(line, c), "' is not a finite number (features must be finite)");
  }
}

// A multi-class label line: one class id in [0, C), or a missing-value token (-1).
std::int64_t parse_class_label(const GzipLineReader& reader, std::string_view line,
                               std::int64_t num_classes, const std::string& flags_source) {
  std::int64_t label = 0;
  if (!parse_int_row(line, &label, 1)) {
    TESSERA_CHECK(count_fields(line) == 1, InvalidInput, reader.where(), ": ",
                  describe_bad_row(line, 1, true), " (multiclass labels: one class id per line)");
    if (is_na_token(line)) return -1;
    float as_float = 0.0f;
    if (!parse_int64(line, label)) {
      // pandas writes labels as floats ("3.0") once a column holds a NaN.
      TESSERA_CHECK(parse_float(line, as_float) && std::isfinite(as_float) &&
                        as_float == std::floor(as_float) && std::fabs(as_float) < 1e15f,
                    InvalidInput, reader.where(), ": '", line,
                    "' is not a class id (expected an integer, or nan for no label)");
      label = static_cast<std::int64_t>(as_float);
    }
  }
  TESSERA_CHECK(label >= 0, InvalidInput, reader.where(), ": negative class id ", label,
                " (use nan for a node without label)");
  TESSERA_CHECK(label < num_classes, InvalidInput, reader.where(), ": class id ", label,
                " is outside [0, ", num_classes, ") (num_classes from ", flags_source, ")");
  return label;
}

// A binary-task label line: T values in {0, 1, missing (one NaN bit pattern)}.
void parse_task_row(const GzipLineReader& reader, std::string_view line, std::int64_t num_tasks,
                    float* row) {
  if (!parse_float_row(line, row, num_tasks)) {
    TESSERA_CHECK(count_fields(line) == num_tasks, InvalidInput, reader.where(), ": ",
                  describe_bad_row(line, num_tasks, false), " (one value per task)");
    for (std::int64_t c = 0; c < num_tasks; ++c) {
      std::string_view field = field_at(line, c);
      if (is_na_token(field)) {
        row[c] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      TESSERA_CHECK(parse_float(field, row[c]), InvalidInput, reader.where(), ": column ", c + 1,
                    ": '", field, "' is not a number");
    }
  }
  for (std::int64_t c = 0; c < num_tasks; ++c) {
    const float value = row[c];
    if (std::isnan(value)) {
      row[c] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    TESSERA_CHECK(value == 0.0f || value == 1.0f, InvalidInput, reader.where(), ": column ", c + 1,
                  ": label '", field_at(line, c), "' is out of range (expected 0, 1 or nan)");
    row[c] = value == 0.0f ? 0.0f : 1.0f;  // "-0" reads as +0
  }
}

// The edge ids of one pass, two NodeIds a line, appended to a file (nothing without a path).
class EdgeCache {
 public:
  explicit EdgeCache(const fs::path& file)
      : file_(file.empty() ? nullptr : std::fopen(file.c_str(), "wb"), &std::fclose), path_(file) {
    TESSERA_CHECK(file.empty() || file_, Io, file.string(), ": cannot create the edge cache");
  }
  void write(std::span<const std::int64_t> sources, std::span<const std::int64_t> destinations) {
    if (!file_) return;
    pairs_.clear();
    for (std::size_t i = 0; i < sources.size(); ++i) {
      pairs_.push_back(static_cast<NodeId>(sources[i]));  // ids are checked in [0, N < 2^31)
      pairs_.push_back(static_cast<NodeId>(destinations[i]));
    }
    TESSERA_CHECK(
        std::fwrite(pairs_.data(), sizeof(NodeId), pairs_.size(), file_.get()) == pairs_.size(), Io,
        path_.string(), ": cannot write the edge cache (disk full?)");
  }
  // True when a cache was written whole.
  bool close() {
    if (!file_) return false;
    TESSERA_CHECK(std::fclose(file_.release()) == 0, Io, path_.string(),
                  ": cannot write the edge cache (disk full?)");
    return true;
  }

 private:
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  fs::path path_;
  std::vector<NodeId> pairs_;
};

// raw/*.csv.gz as an ArraySource: the count files when it opens, then a pass over edge.csv.gz,
// node-feat.csv.gz or node-label.csv.gz per call, each holding exactly the lines the counts say.
class CsvSource final : public ogb::ArraySource {
 public:
  CsvSource(const fs::path& raw, const OgbFlags& flags, bool progress)
      : raw_(raw), flags_(flags), progress_(progress) {
    num_nodes_ = read_count_file(node_count_file(), "node count");
    TESSERA_CHECK(num_nodes_ <= kMaxNodes, InvalidInput, node_count_file().string(), ": ",
                  num_nodes_, " nodes; graphs past 2^31 - 1 nodes are not supported");
    TESSERA_CHECK(!flags.num_nodes || *flags.num_nodes == num_nodes_, InvalidInput, flags.source,
                  ": num_nodes = ", flags.num_nodes.value_or(0), ", but ",
                  node_count_file().string(), " says ", num_nodes_);
    num_edge_lines_ = read_count_file(edge_count_file(), "edge count");
  }

  void cache_edges(const fs::path& file) override { cache_ = file; }

  // The text parsed (and, with a cache, kept), or the cache read back once it is complete.
  void edges(const EdgeVisitor& visit) override {
    if (cache_complete_) return replay_cache(visit);
    EdgeCache cache(cache_);
    GzipLineReader reader(raw_ / "edge.csv.gz", progress_);
    std::vector<std::int64_t> sources, destinations;
    std::int64_t lines = 0;
    std::int64_t ends[2];
    std::string_view line;
    auto flush = [&] {
      cache.write(sources, destinations);
      visit_block(visit, sources, destinations);
    };
    while (reader.next_record(line)) {
      TESSERA_CHECK(lines < num_edge_lines_, InvalidInput, reader.where(),
                    ": more edge lines than the ", num_edge_lines_, " that ",
                    edge_count_file().filename().string(), " announces");
      parse_edge(reader, line, num_nodes_, ends);
      sources.push_back(ends[0]);
      destinations.push_back(ends[1]);
      if (++lines % kLineBlock == 0) flush();
    }
    flush();
    TESSERA_CHECK(lines == num_edge_lines_, InvalidInput, reader.where(), ": file ends after ",
                  lines, " edge lines, but ", edge_count_file().string(), " says ",
                  num_edge_lines_);
    cache_complete_ = cache.close();
  }

  // The first line's field count (0 for an empty file, which then holds too few rows).
  std::int64_t feature_width() override {
    if (width_ >= 0) return width_;
    GzipLineReader reader(feature_file());
    std::string_view line;
    width_ = reader.next_record(line) ? count_fields(line) : 0;
    TESSERA_CHECK(width_ <= kMaxFeatures, InvalidInput, reader.where(), ": ", width_,
                  " columns is past the limit of ", kMaxFeatures, " features per node");
    TESSERA_CHECK(!flags_.num_features || *flags_.num_features == width_, InvalidInput,
                  flags_.source, ": num_features = ", flags_.num_features.value_or(0), ", but ",
                  feature_file().string(), " has ", width_, " columns");
    return width_;
  }

  void features(std::int64_t block_rows, const FeatureVisitor& visit) override {
    const std::int64_t width = feature_width();
    GzipLineReader reader(feature_file(), progress_);
    std::vector<float> block(static_cast<std::size_t>(block_rows * width));
    std::int64_t rows = 0, first = 0;
    std::string_view line;
    while (reader.next_record(line)) {
      TESSERA_CHECK(rows < num_nodes_, InvalidInput, reader.where(),
                    ": more feature rows than the ", num_nodes_, " nodes that ",
                    node_count_file().filename().string(), " announces");
      parse_feature_row(reader, line, width, block.data() + (rows - first) * width);
      if (++rows - first == block_rows) {
        visit(first, rows - first, block.data());
        first = rows;
      }
    }
    if (rows > first) visit(first, rows - first, block.data());
    TESSERA_CHECK(rows == num_nodes_, InvalidInput, reader.where(), ": file ends after ", rows,
                  " feature rows, but ", node_count_file().string(), " says ", num_nodes_,
                  " nodes");
  }

  void labels(std::int64_t block_nodes, const LabelVisitor& visit) override {
    GzipLineReader reader(raw_ / "node-label.csv.gz");
    const bool multiclass = flags_.task == TaskType::MultiClass;
    const std::int64_t width = multiclass ? 1 : flags_.num_tasks;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(multiclass ? block_nodes : 0));
    std::vector<float> targets(static_cast<std::size_t>(multiclass ? 0 : block_nodes * width));
    auto flush = [&](std::int64_t first, std::int64_t n) {
      if (n > 0)
        visit(first, n, multiclass ? ids.data() : nullptr, multiclass ? nullptr : targets.data());
    };
    std::int64_t rows = 0, first = 0;
    std::string_view line;
    while (reader.next_record(line)) {
      TESSERA_CHECK(rows < num_nodes_, InvalidInput, reader.where(), ": more label lines than the ",
                    num_nodes_, " nodes that ", node_count_file().filename().string(),
                    " announces");
      const std::int64_t at = rows - first;
      if (multiclass) {
        ids[static_cast<std::size_t>(at)] =
            parse_class_label(reader, line, flags_.num_classes, flags_.source);
      } else {
        parse_task_row(reader, line, width, targets.data() + at * width);
      }
      if (++rows - first == block_nodes) {
        flush(first, rows - first);
        first = rows;
      }
    }
    flush(first, rows - first);
    TESSERA_CHECK(rows == num_nodes_, InvalidInput, reader.where(), ": file ends after ", rows,
                  " label lines, but ", node_count_file().string(), " says ", num_nodes_, " nodes");
  }

 private:
  static void visit_block(const EdgeVisitor& visit, std::vector<std::int64_t>& sources,
                          std::vector<std::int64_t>& destinations) {
    if (!sources.empty()) visit(sources, destinations);
    sources.clear();
    destinations.clear();
  }
  fs::path node_count_file() const { return raw_ / "num-node-list.csv.gz"; }
  fs::path edge_count_file() const { return raw_ / "num-edge-list.csv.gz"; }
  fs::path feature_file() const { return raw_ / "node-feat.csv.gz"; }

  // The edges of a pass read back from the cache, kLineBlock lines at a time.
  void replay_cache(const EdgeVisitor& visit) const {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(cache_.c_str(), "rb"),
                                                       &std::fclose);
    TESSERA_CHECK(in, Io, cache_.string(), ": cannot open the edge cache");
    std::vector<NodeId> pairs;
    std::vector<std::int64_t> sources, destinations;
    for (std::int64_t first = 0; first < num_edge_lines_; first += kLineBlock) {
      const std::int64_t n = std::min(kLineBlock, num_edge_lines_ - first);
      pairs.resize(static_cast<std::size_t>(2 * n));
      TESSERA_CHECK(
          std::fread(pairs.data(), sizeof(NodeId), pairs.size(), in.get()) == pairs.size(), Io,
          cache_.string(), ": cannot read back the edge cache");
      for (std::int64_t i = 0; i < n; ++i) {
        sources.push_back(pairs[static_cast<std::size_t>(2 * i)]);
        destinations.push_back(pairs[static_cast<std::size_t>(2 * i + 1)]);
      }
      visit_block(visit, sources, destinations);
    }
  }

  fs::path raw_;
  OgbFlags flags_;
  bool progress_;
  std::int64_t width_ = -1;
  fs::path cache_;               // empty: no cache
  bool cache_complete_ = false;  // a whole pass is in cache_
};

// Error path of read_split_file: the line on which `id` first appears.
std::int64_t first_line_with(const fs::path& file, std::int64_t id) {
  GzipLineReader reader(file);
  std::string_view line;
  std::int64_t value = 0;
  while (reader.next_record(line)) {
    if (parse_int64(line, value) && value == id) return reader.line_number();
  }
  return 0;
}

// split/<name>/<part>.csv.gz: one node id per line, in [0, N), each at most once.
std::vector<GlobalId> read_split_file(const fs::path& file, std::int64_t num_nodes) {
  GzipLineReader reader(file);
  std::vector<GlobalId> ids;
  std::vector<bool> seen(static_cast<std::size_t>(num_nodes), false);
  std::string_view line;
  while (reader.next_record(line)) {
    std::int64_t id = 0;
    if (!parse_int_row(line, &id, 1)) parse_int_fields(reader, line, &id, 1);
    TESSERA_CHECK(id >= 0 && id < num_nodes, InvalidInput, reader.where(), ": node id ", id,
                  " is outside [0, ", num_nodes, ")");
    TESSERA_CHECK(!seen[static_cast<std::size_t>(id)], InvalidInput, reader.where(), ": node id ",
                  id, " is listed twice in this split (first on line ", first_line_with(file, id),
                  ")");
    seen[static_cast<std::size_t>(id)] = true;
    ids.push_back(id);
  }
  return ids;
}

fs::path choose_split_dir(const fs::path& dir, const OgbFlags& flags) {
  fs::path split_root = dir / "split";
  std::vector<std::string> names;
  if (fs::is_directory(split_root)) {
    for (const fs::directory_entry& entry : fs::directory_iterator(split_root)) {
      if (entry.is_directory()) names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  std::string present;
  for (const std::string& name : names) present += (present.empty() ? "" : ", ") + name;
  if (!flags.split.empty()) {
    fs::path chosen = split_root / flags.split;
    TESSERA_CHECK(fs::is_directory(chosen), Io, chosen.string(), ": split folder not found (",
                  flags.source, " names split '", flags.split, "'; present: ",
                  present.empty() ? "none" : present, ")");
    return chosen;
  }
  TESSERA_CHECK(!names.empty(), Io, split_root.string(), ": no split/<name>/ folder found");
  TESSERA_CHECK(names.size() == 1, InvalidInput, split_root.string(), ": several splits (", present,
                ") and ", flags.source, " names none (key 'split')");
  return split_root / names.front();
}

void refuse_unsupported_layouts(const fs::path& dir) {
  fs::path raw = dir / "raw";
  TESSERA_CHECK(!fs::exists(raw / "num-node-dict.csv.gz"), InvalidInput,
                (raw / "num-node-dict.csv.gz").string(),
                ": a heterogeneous OGB dataset (ogbn-mag style) is not supported");
}

// The CSV layout's arrays (raw/*.csv.gz) into `dataset`: labels first (they confirm the node
// count before the large arrays are allocated), then the edges and the features.
void read_csv_arrays(const fs::path& raw, const OgbFlags& flags, const LoadOptions& options,
                     Dataset& dataset) {
  CsvSource source(raw, flags, options.progress);
  const std::int64_t num_nodes = source.num_nodes();
  ogb::read_labels(source, flags, dataset);

  // Reserve what the count says unless the file is too small to hold it (a bogus count must
  // not allocate memory): real edge lists compress to well over 1/4 byte per line.
  std::vector<Edge> edges;
  std::error_code ec;
  const auto plausible = static_cast<std::int64_t>(4 * fs::file_size(raw / "edge.csv.gz", ec));
  edges.reserve(static_cast<std::size_t>(
      std::min(source.num_edge_lines(), std::max(plausible, kReserveCap))));
  source.edges(
      [&](std::span<const std::int64_t> sources, std::span<const std::int64_t> destinations) {
        for (std::size_t i = 0; i < sources.size(); ++i) {
          edges.push_back({static_cast<NodeId>(sources[i]), static_cast<NodeId>(destinations[i])});
        }
      });
  dataset.graph = csr_from_edges(num_nodes, std::move(edges), flags.add_inverse_edge);
  dataset.num_edge_lines = source.num_edge_lines();

  if (flags.has_node_attr.value_or(true)) {
    const std::int64_t width = source.feature_width();
    dataset.features = Tensor(num_nodes, width);
    source.features(kLineBlock / 16,
                    [&](std::int64_t first, std::int64_t rows, const float* values) {
                      std::memcpy(dataset.features.f32() + first * width, values,
                                  static_cast<std::size_t>(rows * width) * sizeof(float));
                    });
    if (width == 0) dataset.features = Tensor(0, 0);  // an empty file of no nodes
  } else {
    dataset.features = Tensor(num_nodes, 0);
  }
}

}  // namespace

namespace ogb {

OgbFlags read_flags(const fs::path& dir) {
  refuse_unsupported_layouts(dir);
  return flags_of_folder(dir);
}

std::string dataset_name(const fs::path& dir) { return folder_name(dir); }

void read_labels(ArraySource& source, const OgbFlags& flags, Dataset& dataset) {
  std::vector<float> targets;  // grows with the file, whatever the counts say
  source.labels(kLineBlock, [&](std::int64_t, std::int64_t n, const std::int64_t* class_ids,
                                const float* values) {
    if (class_ids) {
      dataset.labels.insert(dataset.labels.end(), class_ids, class_ids + n);
    } else {
      targets.insert(targets.end(), values, values + n * flags.num_tasks);
    }
  });
  if (flags.task == TaskType::MultiLabel) {
    dataset.targets = Tensor(source.num_nodes(), flags.num_tasks);
    if (!targets.empty()) std::memcpy(dataset.targets.f32(), targets.data(), targets.size() * 4);
  }
}

std::unique_ptr<ArraySource> open_csv_source(const fs::path& raw, const OgbFlags& flags,
                                             bool progress) {
  return std::make_unique<CsvSource>(raw, flags, progress);
}

void read_splits(const fs::path& dir, const OgbFlags& flags, std::int64_t num_nodes,
                 Dataset& dataset) {
  const fs::path split_dir = choose_split_dir(dir, flags);
  TESSERA_CHECK(fs::exists(split_dir / "train.csv.gz") || !fs::exists(split_dir / "split_dict.pt"),
                InvalidInput, (split_dir / "split_dict.pt").string(),
                ": torch-saved splits are not supported; write train/valid/test.csv.gz");
  dataset.train_idx = read_split_file(split_dir / "train.csv.gz", num_nodes);
  dataset.valid_idx = read_split_file(split_dir / "valid.csv.gz", num_nodes);
  dataset.test_idx = read_split_file(split_dir / "test.csv.gz", num_nodes);
}

}  // namespace ogb

Dataset read_ogb_raw(const fs::path& dir, const LoadOptions& options) {
  TESSERA_CHECK(fs::is_directory(dir), Io, dir.string(), ": dataset directory not found");
  const OgbFlags flags = ogb::read_flags(dir);
  const fs::path raw = dir / "raw";

  Dataset dataset;
  dataset.name = folder_name(dir);
  dataset.task = flags.task;
  dataset.eval_metric = flags.eval_metric;
  dataset.num_classes = flags.num_classes;
  dataset.num_tasks = flags.num_tasks;
  dataset.add_inverse_edge = flags.add_inverse_edge;
  // OGB's binary variant when raw/data.npz is there without the CSV edges.
  if (ogb::is_binary_layout(raw)) {
    ogb::read_npz_arrays(raw, flags, dataset);
  } else {
    read_csv_arrays(raw, flags, options, dataset);
  }
  const std::int64_t num_nodes = dataset.num_nodes();

  ogb::read_splits(dir, flags, num_nodes, dataset);

  validate(dataset, dir.string());
  return dataset;
}

}  // namespace tessera
