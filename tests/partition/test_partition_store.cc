// SPDX-License-Identifier: Apache-2.0
// The partition store on disk: a K = 3 store read back part by part equals what PartBuilder
// builds, meta.json round-trips, in-memory part images round-trip; every kind of bad store
// (missing, malformed, truncated, corrupted or foreign files) is an Error naming the file; and
// writing never leaves a partial store or a temporary directory behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/synthetic.h"
#include "core/error.h"
#include "partition/partition_store.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// A dataset, its plan and builder, and the meta a store of it records.
struct Source {
  Dataset dataset;
  Csr graph;
  PartitionPlan plan;
  DatasetInfo info;
  StoreMeta meta;
  std::vector<GlobalId> order;  // the renumbering (empty: the dataset's ids)
  std::optional<PartBuilder> builder;

  Source(std::uint64_t dataset_seed, int k, std::optional<PartitionPlan> given = {},
         NodeOrder node_order = NodeOrder::None) {
    SyntheticConfig c;
    c.name = "store-test";
    c.num_nodes = 300;
    c.num_edges = 1200;
    c.num_features = 7;
    c.num_classes = 4;
    c.seed = dataset_seed;
    dataset = generate_synthetic(c);
    graph = training_graph(dataset);
    plan = given ? *given : make_partition(PartitionMethod::Metis, graph, dataset.train_idx, k, 9);
    info = dataset_info(dataset);
    meta.dataset_spec = "synth:store-test:" + std::to_string(dataset_seed);
    meta.dataset = info;
    meta.num_parts = k;
    meta.method = PartitionMethod::Metis;
    meta.seed = 9;
    meta.stats = partition_stats(graph, plan, dataset.train_idx);
    meta.stats.seconds = 0.25;
    meta.node_order = node_order;
    order = renumber_partitioned(node_order, dataset, graph, plan);
    builder.emplace(dataset, graph, plan, info, order);
  }
};

// Every field of two parts, exactly; features with the first differing index on failure.
void expect_equal_parts(const GraphPart& a, const GraphPart& b) {
  EXPECT_EQ(a.dataset.name, b.dataset.name);
  EXPECT_EQ(a.dataset.task, b.dataset.task);
  EXPECT_EQ(a.dataset.eval_metric, b.dataset.eval_metric);
  EXPECT_EQ(a.dataset.num_classes, b.dataset.num_classes);
  EXPECT_EQ(a.dataset.num_nodes, b.dataset.num_nodes);
  EXPECT_EQ(a.dataset.num_edges, b.dataset.num_edges);
  EXPECT_EQ(a.dataset.num_features, b.dataset.num_features);
  EXPECT_EQ(a.dataset.fingerprint, b.dataset.fingerprint);
  const LocalGraph &ga = a.graph, &gb = b.graph;
  EXPECT_EQ(ga.part, gb.part);
  EXPECT_EQ(ga.num_parts, gb.num_parts);
  EXPECT_EQ(ga.owned_ids, gb.owned_ids);
  EXPECT_EQ(ga.halo_ids, gb.halo_ids);
  EXPECT_EQ(ga.input_ids, gb.input_ids);
  EXPECT_EQ(ga.adjacency.num_cols(), gb.adjacency.num_cols());
  EXPECT_EQ(ga.adjacency.indptr(), gb.adjacency.indptr());
  EXPECT_EQ(ga.adjacency.indices(), gb.adjacency.indices());
  EXPECT_EQ(ga.degrees, gb.degrees);
  EXPECT_EQ(ga.halo.send_offsets, gb.halo.send_offsets);
  EXPECT_EQ(ga.halo.send_rows, gb.halo.send_rows);
  EXPECT_EQ(ga.halo.recv_offsets, gb.halo.recv_offsets);
  ASSERT_TRUE(a.features.same_shape(b.features))
      << a.features.shape_string() << " vs " << b.features.shape_string();
  const float *x = a.features.f32(), *y = b.features.f32();
  const auto mismatch = std::mismatch(x, x + a.features.numel(), y);
  EXPECT_EQ(mismatch.first, x + a.features.numel())
      << "features differ first at flat index " << (mismatch.first - x);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.train_rows, b.train_rows);
  EXPECT_EQ(a.valid_rows, b.valid_rows);
  EXPECT_EQ(a.test_rows, b.test_rows);
}

// Runs `action` and expects a tessera::Error whose message names `file` and holds `piece`.
void expect_error_naming(const std::function<void()>& action, const fs::path& file,
                         const std::string& piece) {
  try {
    action();
    ADD_FAILURE() << "no error; expected one naming " << file;
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(e.message().find(piece), std::string::npos) << "'" << piece << "' in " << e.what();
  }
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

class PartitionStore : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("tessera_store_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    store_ = root_ / "k3";
    write_partition_store(store_, *source_.builder, source_.meta, false);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path part_file(int p) const { return store_ / part_file_name(p); }
  GraphPart read(int p) const { return read_part(store_, read_store_meta(store_), p); }
  // Replaces part 1 of the K = 3 store with part 1 of a store made from `other`.
  void transplant_part_1(const Source& other) const {
    const fs::path dir = root_ / "other";
    write_partition_store(dir, *other.builder, other.meta, false);
    fs::copy_file(dir / part_file_name(1), part_file(1), fs::copy_options::overwrite_existing);
  }

  Source source_{1, 3};
  fs::path root_, store_;
};

TEST_F(PartitionStore, PartsAndMetaRoundTrip) {
  EXPECT_EQ(listing(store_), (std::vector<std::string>{"meta.json", "part-00000.h5",
                                                       "part-00001.h5", "part-00002.h5"}));
  const StoreMeta m = read_store_meta(store_);
  const StoreMeta& w = source_.meta;
  EXPECT_EQ(m.dataset_spec, w.dataset_spec);
  EXPECT_EQ(m.dataset.name, w.dataset.name);
  EXPECT_EQ(m.dataset.fingerprint, w.dataset.fingerprint);
  EXPECT_EQ(m.dataset.num_nodes, w.dataset.num_nodes);
  EXPECT_EQ(m.dataset.num_classes, w.dataset.num_classes);
  EXPECT_EQ(m.num_parts, 3);
  EXPECT_EQ(m.method, PartitionMethod::Metis);
  EXPECT_EQ(m.seed, 9u);
  EXPECT_EQ(m.stats.edge_cut, w.stats.edge_cut);
  EXPECT_EQ(m.stats.owned_nodes, w.stats.owned_nodes);
  EXPECT_EQ(m.stats.halo_nodes, w.stats.halo_nodes);
  EXPECT_EQ(m.stats.halo_nodes_total, w.stats.halo_nodes_total);
  EXPECT_EQ(m.stats.train_nodes, w.stats.train_nodes);
  EXPECT_DOUBLE_EQ(m.stats.replication_factor, w.stats.replication_factor);
  EXPECT_DOUBLE_EQ(m.stats.node_imbalance, w.stats.node_imbalance);
  EXPECT_DOUBLE_EQ(m.stats.train_imbalance, w.stats.train_imbalance);
  EXPECT_DOUBLE_EQ(m.stats.seconds, 0.25);
  for (int p = 0; p < 3; ++p) {
    SCOPED_TRACE("part " + std::to_string(p));
    expect_equal_parts(read_part(store_, m, p), source_.builder->build(p));
  }
  EXPECT_THROW(read_part(store_, m, 3), Error);
}

// A store of renumbered nodes: meta.json names the order, every part file keeps its input ids,
// and the parts map back to the dataset's rows; a part of the store made without renumbering
// is refused (another plan over the renumbered ids).
TEST_F(PartitionStore, RenumberedStoreKeepsInputIds) {
  const Source renumbered(1, 3, {}, NodeOrder::Rcm);
  ASSERT_FALSE(renumbered.order.empty());
  const fs::path dir = root_ / "rcm";
  write_partition_store(dir, *renumbered.builder, renumbered.meta, false);
  const StoreMeta m = read_store_meta(dir);
  EXPECT_EQ(m.node_order, NodeOrder::Rcm);
  EXPECT_EQ(read_store_meta(store_).node_order, NodeOrder::None);
  const Dataset& given = source_.dataset;  // the same dataset, not renumbered
  std::int64_t owned = 0;
  for (int p = 0; p < 3; ++p) {
    SCOPED_TRACE("part " + std::to_string(p));
    const GraphPart part = read_part(dir, m, p);
    expect_equal_parts(part, renumbered.builder->build(p));
    ASSERT_EQ(part.graph.input_ids.size(), part.graph.owned_ids.size());
    for (std::int64_t i = 0; i < part.graph.num_owned(); ++i) {
      const GlobalId v = part.graph.input_ids[static_cast<std::size_t>(i)];
      EXPECT_EQ(source_.plan.owner[static_cast<std::size_t>(v)], p);
      EXPECT_EQ(part.features.row<float>(i)[0], given.features.row<float>(v)[0]);
      EXPECT_EQ(part.labels[static_cast<std::size_t>(i)],
                given.labels[static_cast<std::size_t>(v)]);
    }
    owned += part.graph.num_owned();
  }
  EXPECT_EQ(owned, given.num_nodes());
  fs::copy_file(store_ / part_file_name(1), dir / part_file_name(1),
                fs::copy_options::overwrite_existing);
  expect_error_naming([&] { read_part(dir, m, 1); }, dir / part_file_name(1),
                      "another partitioning");
}

TEST_F(PartitionStore, PartImageRoundTrip) {
  for (int p = 0; p < 3; ++p) {
    SCOPED_TRACE("part " + std::to_string(p));
    const GraphPart part = source_.builder->build(p);
    const std::vector<std::byte> image = part_image(part);
    expect_equal_parts(part_from_image(image, "image"), part);
    std::vector<std::byte> cut(image.begin(), image.begin() + image.size() / 2);
    expect_error_naming([&] { part_from_image(cut, "image of part"); }, "image of part", "");
  }
}

TEST_F(PartitionStore, BadMetaIsNamed) {
  const fs::path meta = store_ / "meta.json";
  std::ifstream in(meta);
  nlohmann::json good = nlohmann::json::parse(in);
  auto write_meta = [&](const std::string& text) { std::ofstream(meta) << text; };
  fs::remove(meta);
  expect_error_naming([&] { read_store_meta(store_); }, meta, "cannot open");
  write_meta("{\"format\": \"tessera-partitions\", ");
  expect_error_naming([&] { read_store_meta(store_); }, meta, "parse error");
  for (const char* key : {"num_parts", "fingerprint", "stats"}) {
    nlohmann::json j = good;
    j.erase(key);
    write_meta(j.dump());
    expect_error_naming([&] { read_store_meta(store_); }, meta, key);
  }
  nlohmann::json bad_order = good;
  bad_order["node_order"] = "metis";
  write_meta(bad_order.dump());
  expect_error_naming([&] { read_store_meta(store_); }, meta, "node_order 'metis'");
  nlohmann::json renumbered = good;  // says rcm, but the part files hold no input ids
  renumbered["node_order"] = "rcm";
  write_meta(renumbered.dump());
  expect_error_naming([&] { read(1); }, part_file(1), "has no /input_ids");
  nlohmann::json older = good;  // written before node orders: the dataset's ids
  older.erase("node_order");
  write_meta(older.dump());
  EXPECT_EQ(read_store_meta(store_).node_order, NodeOrder::None);
  write_meta(good.dump());
  EXPECT_NO_THROW(read_store_meta(store_));
  expect_error_naming([&] { read_store_meta(root_ / "nowhere"); }, root_ / "nowhere", "no such");
}

TEST_F(PartitionStore, MissingOrTruncatedPartFileIsNamed) {
  const std::uintmax_t size = fs::file_size(part_file(1));
  fs::resize_file(part_file(1), size / 2);
  expect_error_naming([&] { read(1); }, part_file(1), "");
  fs::resize_file(part_file(1), 100);
  expect_error_naming([&] { read(1); }, part_file(1), "");
  fs::remove(part_file(1));
  expect_error_naming([&] { read(1); }, part_file(1), "no such file");
  EXPECT_NO_THROW(read(2));  // the other parts are still readable
}

std::string file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes `bytes` to `file` with the byte at `offset` flipped and reads part 1 back: either an
// Error naming the file (returned), or a part that must equal `original` (flips in unused space).
std::optional<std::string> read_with_flip(const std::function<GraphPart()>& read_part_1,
                                          const fs::path& file, std::string bytes,
                                          std::size_t offset, const GraphPart& original) {
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x5a);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  SCOPED_TRACE("byte " + std::to_string(offset) + " of " + file.string() + " flipped");
  try {
    expect_equal_parts(read_part_1(), original);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(file.string()), std::string::npos) << e.what();
    return e.message();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a tessera::Error naming the file: " << e.what();
    return e.what();
  }
  return std::nullopt;
}

// A flipped byte inside the feature rows (found by their exact bytes) is caught by the
// Fletcher-32 checksum of their chunk.
TEST_F(PartitionStore, FlippedFeatureByteIsCaughtByChecksum) {
  const GraphPart original = source_.builder->build(1);
  const std::string bytes = file_bytes(part_file(1));
  const std::string features(static_cast<const char*>(original.features.raw()),
                             original.features.bytes());
  const std::size_t at = bytes.find(features);
  ASSERT_NE(at, std::string::npos) << "the feature rows are not stored verbatim in the file";
  for (std::size_t offset : {at, at + features.size() / 2, at + features.size() - 1}) {
    const auto error =
        read_with_flip([&] { return read(1); }, part_file(1), bytes, offset, original);
    ASSERT_TRUE(error.has_value()) << "flipped feature byte " << offset << " was read silently";
    EXPECT_NE(error->find("checksum"), std::string::npos) << *error;
  }
}

// Part files are written in the HDF5 1.10 format, whose metadata (superblock, object headers,
// chunk index) carries checksums as the arrays do: without them, a flip in the chunk index of
// /features made HDF5 return fill values (all zeros, no error) and a flip in a dataspace made
// the reader allocate a huge vector. Scans every 16th byte: each flip must fail the read.
TEST_F(PartitionStore, NoFlippedByteIsReadSilently) {
  const GraphPart original = source_.builder->build(1);
  const std::string bytes = file_bytes(part_file(1));
  for (std::size_t offset = 0; offset < bytes.size(); offset += 16)
    read_with_flip([&] { return read(1); }, part_file(1), bytes, offset, original);
}

TEST_F(PartitionStore, PartFromAnotherStoreIsRefused) {
  transplant_part_1(Source(1, 2));  // same dataset, K = 2
  expect_error_naming([&] { read(1); }, part_file(1), "2-part store");
}

TEST_F(PartitionStore, PartFromAnotherDatasetIsRefused) {
  transplant_part_1(Source(2, 3));  // same sizes and K, another seed
  expect_error_naming([&] { read(1); }, part_file(1), "another dataset");
}

TEST_F(PartitionStore, NonEmptyTargetIsRefusedAndLeftAlone) {
  const fs::path target = root_ / "taken";
  fs::create_directories(target);
  std::ofstream(target / "notes.txt") << "keep me";
  const std::vector<std::string> before = listing(root_);
  try {
    write_partition_store(target, *source_.builder, source_.meta, false);
    ADD_FAILURE() << "wrote into a non-empty directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << e.what();
    EXPECT_NE(e.message().find(target.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(listing(target), std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(listing(root_), before);
  std::ifstream in(target / "notes.txt");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "keep me");
  const fs::path empty = root_ / "empty";  // an existing empty directory is fine
  fs::create_directories(empty);
  write_partition_store(empty, *source_.builder, source_.meta, false);
  EXPECT_EQ(listing(empty).size(), 4u);
}

// Part 0 is written, then part 1 (which owns no node) fails validation: neither the store nor
// its temporary directory may remain.
TEST_F(PartitionStore, FailureWhileWritingLeavesNothingBehind) {
  PartitionPlan gap{3, std::vector<std::int32_t>(300, 0)};
  for (std::size_t v = 150; v < 300; ++v) gap.owner[v] = 2;
  Source broken(1, 3, gap);
  const std::vector<std::string> before = listing(root_);
  const fs::path target = root_ / "broken";
  expect_error_naming([&] { write_partition_store(target, *broken.builder, broken.meta, false); },
                      "part 1", "owns no node");
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(listing(root_), before) << "a temporary directory was left behind";
}

}  // namespace
}  // namespace tessera
