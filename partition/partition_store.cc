// SPDX-License-Identifier: Apache-2.0
// Partition store I/O: meta.json through nlohmann::json, part files through the hdf5_io layer
// with per-chunk checksums. Part file layout (format "tessera-part", version 1): attributes of
// "/" name the part, K, the dataset (name, task, metric, sizes, fingerprint); arrays
// /owned_ids, /halo_ids (int64), /input_ids (int64, only in parts of renumbered nodes),
// /graph/{indptr int64, indices int32, degrees float32},
// /halo/{send_offsets int64, send_rows int32, recv_offsets int64}, /features (N, F) float32,
// /labels int64 or /targets (N, T) float32, /split/{train,valid,test} int32 (local rows).
#include "partition/partition_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/error.h"
#include "datasets/hdf5_io.h"
#include "datasets/json_fields.h"
#include "datasets/progress.h"

namespace tessera {
namespace {

using hdf5::kFloat32;
using hdf5::kInt32;
using hdf5::kInt64;

constexpr const char* kPartFormat = "tessera-part";
constexpr const char* kStoreFormat = "tessera-partitions";
// Version 2 added the plan fingerprint (meta.json and every part file).
constexpr std::int64_t kFormatVersion = 2;

TaskType parse_task(const std::string& text, const std::string& where) {
  TESSERA_CHECK(text == "multiclass" || text == "multilabel", InvalidInput, where, ": task '",
                text, "', expected 'multiclass' or 'multilabel'");
  return text == "multiclass" ? TaskType::MultiClass : TaskType::MultiLabel;
}

template <class T>
void write_vector(hdf5::Writer& out, const char* path, const hdf5::ElementType& type,
                  const std::vector<T>& values) {
  out.array(path, type, values.data(), static_cast<std::int64_t>(values.size()), 1, 1, false);
}

void write_part(hdf5::Writer& out, const GraphPart& p) {
  const LocalGraph& g = p.graph;
  const DatasetInfo& d = p.dataset;
  out.enable_checksums();
  out.attribute("format", std::string(kPartFormat));
  out.attribute("format_version", kFormatVersion);
  out.attribute("part", std::int64_t{g.part});
  out.attribute("num_parts", std::int64_t{g.num_parts});
  out.attribute("dataset_name", d.name);
  out.attribute("task", std::string(to_string(d.task)));
  out.attribute("eval_metric", d.eval_metric);
  out.attribute("num_classes", d.num_classes);
  out.attribute("num_tasks", d.num_tasks);
  out.attribute("num_nodes", d.num_nodes);
  out.attribute("num_edges", d.num_edges);
  out.attribute("num_features", d.num_features);
  out.attribute("fingerprint", d.fingerprint);
  out.attribute("plan_fingerprint", g.plan_fingerprint);
  write_vector(out, "/owned_ids", kInt64, g.owned_ids);
  write_vector(out, "/halo_ids", kInt64, g.halo_ids);
  if (!g.input_ids.empty()) write_vector(out, "/input_ids", kInt64, g.input_ids);
  out.group("/graph");
  write_vector(out, "/graph/indptr", kInt64, g.adjacency.indptr());
  write_vector(out, "/graph/indices", kInt32, g.adjacency.indices());
  write_vector(out, "/graph/degrees", kFloat32, g.degrees);
  out.group("/halo");
  write_vector(out, "/halo/send_offsets", kInt64, g.halo.send_offsets);
  write_vector(out, "/halo/send_rows", kInt32, g.halo.send_rows);
  write_vector(out, "/halo/recv_offsets", kInt64, g.halo.recv_offsets);
  const Tensor& x = p.features;
  out.array("/features", kFloat32, x.empty() ? nullptr : x.raw(), x.rows(), x.cols(), 2, true);
  if (d.task == TaskType::MultiClass) {
    write_vector(out, "/labels", kInt64, p.labels);
  } else {
    const Tensor& y = p.targets;
    out.array("/targets", kFloat32, y.empty() ? nullptr : y.raw(), y.rows(), y.cols(), 2, true);
  }
  out.group("/split");
  write_vector(out, "/split/train", kInt32, p.train_rows);
  write_vector(out, "/split/valid", kInt32, p.valid_rows);
  write_vector(out, "/split/test", kInt32, p.test_rows);
}

GraphPart read_part_contents(hdf5::Reader& in, const std::string& label) {
  TESSERA_CHECK(in.has_attribute("format") && in.string_attribute("format") == kPartFormat,
                InvalidInput, label, ": not a Tessera part file (format attribute missing or not '",
                kPartFormat, "')");
  const std::int64_t version = in.int64_attribute("format_version");
  TESSERA_CHECK(version == kFormatVersion, InvalidInput, label, ": part format version ", version,
                " is not supported (this build reads version ", kFormatVersion, ")");
  GraphPart p;
  DatasetInfo& d = p.dataset;
  LocalGraph& g = p.graph;
  g.part = static_cast<int>(in.int64_attribute("part"));
  g.num_parts = static_cast<int>(in.int64_attribute("num_parts"));
  d.name = in.string_attribute("dataset_name");
  d.task = parse_task(in.string_attribute("task"), label);
  d.eval_metric = in.string_attribute("eval_metric");
  d.num_classes = in.int64_attribute("num_classes");
  d.num_tasks = in.int64_attribute("num_tasks");
  d.num_nodes = in.int64_attribute("num_nodes");
  d.num_edges = in.int64_attribute("num_edges");
  d.num_features = in.int64_attribute("num_features");
  d.fingerprint = in.uint64_attribute("fingerprint");
  g.plan_fingerprint = in.uint64_attribute("plan_fingerprint");

  g.owned_ids = in.vector<GlobalId>("/owned_ids", kInt64, -1);
  g.halo_ids = in.vector<GlobalId>("/halo_ids", kInt64, -1);
  const std::int64_t n = g.num_owned();
  const std::int64_t h = g.num_halo();
  if (in.has_dataset("/input_ids")) g.input_ids = in.vector<GlobalId>("/input_ids", kInt64, n);
  std::vector<EdgeOffset> indptr = in.vector<EdgeOffset>("/graph/indptr", kInt64, n + 1);
  std::vector<NodeId> indices = in.vector<NodeId>("/graph/indices", kInt32, -1);
  try {
    g.adjacency = Csr(n, n + h, std::move(indptr), std::move(indices));
  } catch (const Error& error) {
    TESSERA_FAIL(InvalidInput, label, ": /graph: ", error.message());
  }
  g.degrees = in.vector<float>("/graph/degrees", kFloat32, n + h);
  g.halo.send_offsets = in.vector<std::int64_t>("/halo/send_offsets", kInt64, g.num_parts + 1);
  g.halo.send_rows = in.vector<NodeId>("/halo/send_rows", kInt32, -1);
  g.halo.recv_offsets = in.vector<std::int64_t>("/halo/recv_offsets", kInt64, g.num_parts + 1);
  p.features = in.matrix("/features", n);
  if (d.task == TaskType::MultiClass) {
    p.labels = in.vector<std::int64_t>("/labels", kInt64, n);
  } else {
    p.targets = in.matrix("/targets", n);
  }
  p.train_rows = in.vector<NodeId>("/split/train", kInt32, -1);
  p.valid_rows = in.vector<NodeId>("/split/valid", kInt32, -1);
  p.test_rows = in.vector<NodeId>("/split/test", kInt32, -1);
  validate(p, label);
  return p;
}

nlohmann::json stats_json(const PartitionStats& s) {
  return {{"edge_cut", s.edge_cut},
          {"owned_nodes", s.owned_nodes},
          {"halo_nodes", s.halo_nodes},
          {"halo_nodes_total", s.halo_nodes_total},
          {"train_nodes", s.train_nodes},
          {"replication_factor", s.replication_factor},
          {"node_imbalance", s.node_imbalance},
          {"train_imbalance", s.train_imbalance},
          {"seconds", s.seconds}};
}

PartitionStats stats_from_json(const nlohmann::json& j) {
  PartitionStats s;
  s.edge_cut = json_integer_at<std::int64_t>(j, "edge_cut");
  s.owned_nodes = json_integers_at<std::int64_t>(j, "owned_nodes");
  s.halo_nodes = json_integers_at<std::int64_t>(j, "halo_nodes");
  s.halo_nodes_total = json_integer_at<std::int64_t>(j, "halo_nodes_total");
  s.train_nodes = json_integers_at<std::int64_t>(j, "train_nodes");
  s.replication_factor = j.at("replication_factor").get<double>();
  s.node_imbalance = j.at("node_imbalance").get<double>();
  s.train_imbalance = j.at("train_imbalance").get<double>();
  s.seconds = j.at("seconds").get<double>();
  return s;
}

std::string meta_text(const StoreMeta& m) {
  const DatasetInfo& d = m.dataset;
  nlohmann::json j = {{"format", kStoreFormat},
                      {"format_version", kFormatVersion},
                      {"dataset", m.dataset_spec},
                      {"dataset_name", d.name},
                      {"fingerprint", fingerprint_hex(d.fingerprint)},
                      {"task", to_string(d.task)},
                      {"eval_metric", d.eval_metric},
                      {"num_classes", d.num_classes},
                      {"num_tasks", d.num_tasks},
                      {"num_nodes", d.num_nodes},
                      {"num_edges", d.num_edges},
                      {"num_features", d.num_features},
                      {"num_parts", m.num_parts},
                      {"method", to_string(m.method)},
                      {"seed", m.seed},
                      {"node_order", to_string(m.node_order)},
                      {"plan_fingerprint", fingerprint_hex(m.plan_fingerprint)},
                      {"stats", stats_json(m.stats)}};
  nlohmann::json files = nlohmann::json::array();
  for (int p = 0; p < m.num_parts; ++p) files.push_back(part_file_name(p));
  j["parts"] = files;
  return j.dump(2) + "\n";
}

void check_part_matches(const GraphPart& p, const StoreMeta& meta, int part,
                        const std::string& label) {
  TESSERA_CHECK(p.graph.num_parts == meta.num_parts, InvalidInput, label, ": part of a ",
                p.graph.num_parts, "-part store, but meta.json says K = ", meta.num_parts);
  TESSERA_CHECK(p.graph.part == part, InvalidInput, label, ": holds part ", p.graph.part,
                ", expected part ", part);
  TESSERA_CHECK(p.dataset.fingerprint == meta.dataset.fingerprint, InvalidInput, label,
                ": made from another dataset ('", p.dataset.name, "', fingerprint ",
                fingerprint_hex(p.dataset.fingerprint), "; meta.json has '", meta.dataset.name,
                "', ", fingerprint_hex(meta.dataset.fingerprint), ")");
  TESSERA_CHECK(p.graph.plan_fingerprint == meta.plan_fingerprint, InvalidInput, label,
                ": from another partitioning of the dataset (plan fingerprint ",
                fingerprint_hex(p.graph.plan_fingerprint), "; meta.json has ",
                fingerprint_hex(meta.plan_fingerprint),
                "): every part file of a store must come from the partition_graph run that "
                "wrote its meta.json");
  TESSERA_CHECK(p.graph.input_ids.empty() == (meta.node_order == NodeOrder::None), InvalidInput,
                label, ": ", p.graph.input_ids.empty() ? "has no" : "has", " /input_ids, but ",
                "meta.json has node_order ", to_string(meta.node_order));
  const DatasetInfo& a = p.dataset;
  const DatasetInfo& b = meta.dataset;
  TESSERA_CHECK(a.name == b.name && a.task == b.task && a.eval_metric == b.eval_metric &&
                    a.num_classes == b.num_classes && a.num_tasks == b.num_tasks &&
                    a.num_nodes == b.num_nodes && a.num_edges == b.num_edges &&
                    a.num_features == b.num_features,
                InvalidInput, label, ": dataset description (name, task, metric, sizes) "
                "disagrees with meta.json");
}

}  // namespace

std::string part_file_name(int part) {
  char name[32];
  std::snprintf(name, sizeof name, "part-%05d.h5", part);
  return name;
}

void write_partition_store(const std::filesystem::path& dir, const PartBuilder& builder,
                           const StoreMeta& meta, bool progress,
                           const std::function<void(GraphPart&)>& complete) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TESSERA_CHECK(!fs::exists(dir, ec) || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)),
                InvalidArgument, dir.string(),
                ": exists and is not an empty directory; choose a new output directory");
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  const fs::path temporary =
      parent / (dir.filename().string() + ".tmp-" + std::to_string(::getpid()));
  try {
    fs::create_directories(temporary);
    ProgressBar bar("write parts to " + dir.string(), static_cast<std::uint64_t>(meta.num_parts),
                    progress);
    for (int p = 0; p < meta.num_parts; ++p) {
      GraphPart part = builder.build(p);
      if (complete) complete(part);
      validate(part, "part " + std::to_string(p));
      const fs::path file = temporary / part_file_name(p);
      hdf5::Writer out(file, (dir / part_file_name(p)).string());
      write_part(out, part);
      out.close();
      bar.update(static_cast<std::uint64_t>(p + 1));
    }
    bar.finish();
    {
      StoreMeta stored = meta;
      stored.plan_fingerprint = builder.plan_fingerprint();
      std::ofstream out(temporary / "meta.json");
      out << meta_text(stored);
      out.close();
      TESSERA_CHECK(out.good(), Io, (dir / "meta.json").string(), ": cannot write");
    }
    if (fs::exists(dir, ec)) fs::remove(dir);  // empty (checked above)
    fs::rename(temporary, dir);
  } catch (const fs::filesystem_error& error) {
    fs::remove_all(temporary, ec);
    TESSERA_FAIL(Io, dir.string(), ": ", error.code().message(), " (", error.what(), ")");
  } catch (...) {
    fs::remove_all(temporary, ec);
    throw;
  }
}

StoreMeta read_store_meta(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TESSERA_CHECK(fs::is_directory(dir, ec), InvalidArgument, dir.string(),
                ": no such partition store (expected a directory made by partition_graph)");
  const fs::path file = dir / "meta.json";
  const std::string label = file.string();
  std::ifstream in(file);
  TESSERA_CHECK(in.good(), Io, label, ": cannot open (is this a partition store?)");
  StoreMeta m;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    const std::string format = j.at("format").get<std::string>();
    TESSERA_CHECK(format == kStoreFormat, InvalidInput, label, ": format '", format,
                  "', expected '", kStoreFormat, "'");
    const auto version = json_integer_at<std::int64_t>(j, "format_version");
    TESSERA_CHECK(version == kFormatVersion, InvalidInput, label, ": format version ", version,
                  " is not supported (this build reads version ", kFormatVersion, ")");
    m.dataset_spec = j.at("dataset").get<std::string>();
    DatasetInfo& d = m.dataset;
    d.name = j.at("dataset_name").get<std::string>();
    d.fingerprint = std::stoull(j.at("fingerprint").get<std::string>(), nullptr, 16);
    d.task = parse_task(j.at("task").get<std::string>(), label);
    d.eval_metric = j.at("eval_metric").get<std::string>();
    d.num_classes = json_integer_at<std::int64_t>(j, "num_classes");
    d.num_tasks = json_integer_at<std::int64_t>(j, "num_tasks");
    d.num_nodes = json_integer_at<std::int64_t>(j, "num_nodes");
    d.num_edges = json_integer_at<std::int64_t>(j, "num_edges");
    d.num_features = json_integer_at<std::int64_t>(j, "num_features");
    m.num_parts = json_integer_at<int>(j, "num_parts");
    m.method = parse_partition_method(j.at("method").get<std::string>());
    m.seed = json_integer_at<std::uint64_t>(j, "seed");
    // Stores written before renumbering existed hold the dataset's ids.
    const std::string order = j.value("node_order", std::string("none"));
    const std::vector<std::string> orders = node_order_names();
    TESSERA_CHECK(std::find(orders.begin(), orders.end(), order) != orders.end(), InvalidInput,
                  label, ": node_order '", order, "' is not one of rcm, none");
    m.node_order = parse_node_order(order);
    m.plan_fingerprint = std::stoull(j.at("plan_fingerprint").get<std::string>(), nullptr, 16);
    m.stats = stats_from_json(j.at("stats"));
  } catch (const nlohmann::json::exception& error) {
    TESSERA_FAIL(InvalidInput, label, ": ", error.what());
  } catch (const std::domain_error& error) {  // json_integer_at
    TESSERA_FAIL(InvalidInput, label, ": ", error.what());
  } catch (const std::logic_error& error) {  // stoull
    TESSERA_FAIL(InvalidInput, label, ": bad fingerprint (", error.what(), ")");
  }
  TESSERA_CHECK(m.num_parts >= 1 && static_cast<std::int64_t>(m.stats.owned_nodes.size()) ==
                                        m.num_parts,
                InvalidInput, label, ": num_parts ", m.num_parts, " disagrees with the statistics");
  return m;
}

GraphPart read_part(const std::filesystem::path& dir, const StoreMeta& meta, int part) {
  TESSERA_CHECK(part >= 0 && part < meta.num_parts, InvalidArgument, "part ", part,
                " requested from a ", meta.num_parts, "-part store ", dir.string());
  const std::filesystem::path file = dir / part_file_name(part);
  const std::string label = file.string();
  hdf5::Reader in(file, label);
  GraphPart p;
  try {
    p = read_part_contents(in, label);
  } catch (const std::bad_alloc&) {
    TESSERA_FAIL(InvalidInput, label, ": sizes in the file do not fit in memory (corrupt file?)");
  }
  check_part_matches(p, meta, part, label);
  return p;
}

std::vector<std::byte> part_image(const GraphPart& part) {
  hdf5::Writer out("part-" + std::to_string(part.graph.part) + " (in memory)");
  write_part(out, part);
  return out.image();
}

GraphPart part_from_image(std::span<const std::byte> image, const std::string& label) {
  hdf5::Reader in(image, label);
  return read_part_contents(in, label);
}

}  // namespace tessera
