// SPDX-License-Identifier: Apache-2.0
// Tests of the OGB raw-layout reader and writer and the Dataset helpers: Cora's published counts
// (../shared/datasets/cora, skipped when absent), bit-exact round trips of hand-made datasets and
// of Cora, deterministic and OGB-compatible output, flag selection (meta.json, built-in ogbn-*).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/error.h"
#include "datasets/dataset.h"
#include "datasets/gzip_stream.h"
#include "datasets/loaders.h"
#include "tests/shared_datasets.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const fs::path kCoraDir = fs::path(TESSERA_SHARED_DATASETS) / "cora";

// A fresh directory under the system temp folder, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("tessera_ogb_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string gunzip(const fs::path& file) {
  gzFile in = gzopen(file.string().c_str(), "rb");
  EXPECT_NE(in, nullptr) << file;
  std::string text;
  char buffer[1 << 16];
  int got = 0;
  while (in && (got = gzread(in, buffer, sizeof buffer)) > 0) text.append(buffer, got);
  if (in) gzclose(in);
  return text;
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// CSR from (src, dst) pairs via the validating constructor (rows = dst, sorted, unique).
Csr csr_from_pairs(std::int64_t num_nodes, std::vector<std::pair<NodeId, NodeId>> edges) {
  std::sort(edges.begin(), edges.end(),
            [](auto a, auto b) { return std::tie(a.second, a.first) < std::tie(b.second, b.first); });
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::vector<EdgeOffset> indptr(num_nodes + 1, 0);
  std::vector<NodeId> indices;
  for (auto [src, dst] : edges) {
    ++indptr[dst + 1];
    indices.push_back(src);
  }
  for (std::int64_t r = 0; r < num_nodes; ++r) indptr[r + 1] += indptr[r];
  return Csr(num_nodes, num_nodes, std::move(indptr), std::move(indices));
}

float bits_to_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// Multiclass, symmetric graph, awkward floats, one unlabelled node.
Dataset make_multiclass() {
  Dataset d;
  d.name = "small";
  d.task = TaskType::MultiClass;
  d.num_classes = 4;
  d.eval_metric = "acc";
  d.add_inverse_edge = true;
  std::vector<std::pair<NodeId, NodeId>> undirected = {{0, 1}, {1, 2}, {0, 3}, {4, 5}, {2, 5}, {3, 3}};
  std::vector<std::pair<NodeId, NodeId>> directed;
  for (auto [u, v] : undirected) {
    directed.push_back({u, v});
    directed.push_back({v, u});
  }
  d.graph = csr_from_pairs(7, directed);  // node 6 isolated
  d.num_edge_lines = 6;
  const float values[] = {0.0f,    1.0f,     -0.0f,   0.1f,     1.0f / 3.0f, -2.5e-7f,
                          1e30f,   -3.4e38f, 1e-40f,  123456.7f, 16777217.0f, 0.2f,
                          7.0f,    -1.0f,    2.0f,    bits_to_float(0x3f800001), 1.17549435e-38f, 1e-45f,
                          0.3f,    0.7f,     0.9f};
  d.features = Tensor(7, 3);
  std::memcpy(d.features.f32(), values, sizeof values);
  d.labels = {0, 3, 1, -1, 2, 2, 1};
  d.train_idx = {0, 1, 2};
  d.valid_idx = {4};
  d.test_idx = {6, 5};
  return d;
}

// Multi-label (binary tasks), directed graph with a duplicate-free reverse pair, NaN targets.
Dataset make_multilabel() {
  Dataset d;
  d.name = "tasks";
  d.task = TaskType::MultiLabel;
  d.num_classes = 2;
  d.num_tasks = 3;
  d.eval_metric = "rocauc";
  d.add_inverse_edge = false;
  d.graph = csr_from_pairs(5, {{0, 1}, {1, 0}, {2, 1}, {3, 4}, {4, 2}});
  d.num_edge_lines = 5;
  d.features = Tensor(5, 2);
  for (int i = 0; i < 10; ++i) d.features.f32()[i] = 0.25f * static_cast<float>(i) - 1.0f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float targets[] = {1, 0, nan, 0, 0, 1, nan, nan, nan, 1, 1, 1, 0, nan, 0};
  d.targets = Tensor(5, 3);
  std::memcpy(d.targets.f32(), targets, sizeof targets);
  d.train_idx = {0, 1};
  d.valid_idx = {2};
  d.test_idx = {3, 4};
  return d;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         (a.numel() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

void expect_same_dataset(const Dataset& expected, const Dataset& actual) {
  EXPECT_EQ(expected.task, actual.task);
  EXPECT_EQ(expected.eval_metric, actual.eval_metric);
  EXPECT_EQ(expected.num_outputs(), actual.num_outputs());
  EXPECT_EQ(expected.add_inverse_edge, actual.add_inverse_edge);
  EXPECT_EQ(expected.num_edge_lines, actual.num_edge_lines);
  EXPECT_EQ(expected.graph.num_rows(), actual.graph.num_rows());
  EXPECT_EQ(expected.graph.indptr(), actual.graph.indptr());
  EXPECT_EQ(expected.graph.indices(), actual.graph.indices());
  EXPECT_EQ(expected.features.cols(), actual.features.cols());
  if (expected.features.numel() > 0) {
    ASSERT_TRUE(same_bits(expected.features, actual.features));
  }
  EXPECT_EQ(expected.labels, actual.labels);
  if (expected.task == TaskType::MultiLabel) {
    EXPECT_TRUE(same_bits(expected.targets, actual.targets));
  }
  EXPECT_EQ(expected.train_idx, actual.train_idx);
  EXPECT_EQ(expected.valid_idx, actual.valid_idx);
  EXPECT_EQ(expected.test_idx, actual.test_idx);
  EXPECT_EQ(fingerprint(expected), fingerprint(actual));
}

TEST(OgbRaw, MulticlassRoundTripIsBitExact) {
  TempDir tmp;
  Dataset original = make_multiclass();
  write_ogb_raw(original, tmp.path() / "small");
  Dataset read = read_ogb_raw(tmp.path() / "small");
  EXPECT_EQ(read.name, "small");
  expect_same_dataset(original, read);
  EXPECT_EQ(read.labels[3], -1);
  EXPECT_EQ(gunzip(tmp.path() / "small/raw/edge.csv.gz"), "0,1\n0,3\n1,2\n2,5\n3,3\n4,5\n");
  EXPECT_EQ(gunzip(tmp.path() / "small/raw/node-label.csv.gz"), "0\n3\n1\nnan\n2\n2\n1\n");
}

TEST(OgbRaw, MultiLabelRoundTripIsBitExact) {
  TempDir tmp;
  Dataset original = make_multilabel();
  write_ogb_raw(original, tmp.path() / "tasks");
  Dataset read = read_ogb_raw(tmp.path() / "tasks");
  expect_same_dataset(original, read);
  EXPECT_TRUE(std::isnan(read.targets.f32()[2]));
  EXPECT_EQ(read.num_tasks, 3);
  EXPECT_EQ(gunzip(tmp.path() / "tasks/raw/node-label.csv.gz").substr(0, 12), "1,0,nan\n0,0,");
}

TEST(OgbRaw, WriterIsDeterministic) {
  TempDir tmp;
  Dataset d = make_multiclass();
  write_ogb_raw(d, tmp.path() / "a");
  write_ogb_raw(d, tmp.path() / "b");
  for (const char* file : {"raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz",
                           "split/public/test.csv.gz", "meta.json"}) {
    EXPECT_EQ(read_bytes(tmp.path() / "a" / file), read_bytes(tmp.path() / "b" / file)) << file;
  }
}

TEST(OgbRaw, WriterRefusesAsymmetricGraphAndLeavesNothing) {
  TempDir tmp;
  Dataset d = make_multiclass();
  d.graph = csr_from_pairs(7, {{0, 1}, {1, 0}, {2, 1}});  // 2 -> 1 without 1 -> 2
  try {
    write_ogb_raw(d, tmp.path() / "out");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::InvalidArgument);
    EXPECT_NE(error.message().find("not symmetric"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(fs::is_empty(tmp.path())) << "a half-written directory was left behind";
}

TEST(OgbRaw, WriterRefusesNonEmptyTarget) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "out");
  std::ofstream(tmp.path() / "out" / "keep.txt") << "x";
  try {
    write_ogb_raw(make_multiclass(), tmp.path() / "out");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::Io);
  }
  EXPECT_TRUE(fs::exists(tmp.path() / "out" / "keep.txt"));
}

TEST(OgbRaw, ChoosesSplitNamedByMetaAmongSeveral) {
  TempDir tmp;
  write_ogb_raw(make_multiclass(), tmp.path() / "d");
  fs::create_directories(tmp.path() / "d/split/other");
  for (const char* part : {"train", "valid", "test"}) {
    fs::copy_file(tmp.path() / "d/split/public/test.csv.gz",
                  tmp.path() / "d/split/other" / (std::string(part) + ".csv.gz"));
  }
  Dataset read = read_ogb_raw(tmp.path() / "d");  // meta.json names "public"
  EXPECT_EQ(read.train_idx, (std::vector<GlobalId>{0, 1, 2}));
}

TEST(OgbRaw, TakesTheOnlySplitWhenMetaNamesNone) {
  TempDir tmp;
  write_ogb_raw(make_multiclass(), tmp.path() / "d");
  nlohmann::json meta = nlohmann::json::parse(read_bytes(tmp.path() / "d/meta.json"));
  meta.erase("split");
  std::ofstream(tmp.path() / "d/meta.json") << meta.dump();
  fs::rename(tmp.path() / "d/split/public", tmp.path() / "d/split/random");
  Dataset read = read_ogb_raw(tmp.path() / "d");
  EXPECT_EQ(read.test_idx, (std::vector<GlobalId>{6, 5}));
}

TEST(OgbRaw, BuiltInFlagsForOgbnFolderWithoutMeta) {
  TempDir tmp;
  Dataset d = make_multiclass();
  d.num_classes = 47;  // ogbn-products: 47 classes, add_inverse_edge, split sales_ranking
  write_ogb_raw(d, tmp.path() / "ogbn_products");
  fs::remove(tmp.path() / "ogbn_products/meta.json");
  fs::rename(tmp.path() / "ogbn_products/split/public",
             tmp.path() / "ogbn_products/split/sales_ranking");
  Dataset read = read_ogb_raw(tmp.path() / "ogbn_products/");  // trailing slash: same folder
  EXPECT_EQ(read.name, "ogbn_products");
  EXPECT_EQ(read.num_classes, 47);
  EXPECT_TRUE(read.add_inverse_edge);
  expect_same_dataset(d, read);
}

TEST(DatasetHelpers, FingerprintIsStableAndSensitive) {
  Dataset a = make_multiclass();
  Dataset b = make_multiclass();
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  b.features.f32()[5] = 0.5f;
  EXPECT_NE(fingerprint(a), fingerprint(b));
  Dataset c = make_multiclass();
  c.test_idx = {5, 6};
  EXPECT_NE(fingerprint(a), fingerprint(c));
  Dataset m1 = make_multilabel();
  Dataset m2 = make_multilabel();
  m2.targets.f32()[2] = -std::numeric_limits<float>::quiet_NaN();  // another NaN, same data
  EXPECT_EQ(fingerprint(m1), fingerprint(m2));
}

TEST(DatasetHelpers, RowNormalizeKeepsZeroRows) {
  Dataset d = make_multilabel();
  for (int c = 0; c < 2; ++c) d.features.f32()[2 + c] = 0.0f;  // row 1 all zero
  d.features.f32()[0] = 1.0f;
  d.features.f32()[1] = 3.0f;
  row_normalize_features(d);
  EXPECT_FLOAT_EQ(d.features.f32()[0], 0.25f);
  EXPECT_FLOAT_EQ(d.features.f32()[1], 0.75f);
  EXPECT_EQ(d.features.f32()[2], 0.0f);
  EXPECT_EQ(d.features.f32()[3], 0.0f);
}

TEST(DatasetHelpers, ValidateRefusesBadArrays) {
  Dataset d = make_multiclass();
  d.labels[2] = 4;
  EXPECT_THROW(validate(d, "test"), Error);
  d = make_multiclass();
  d.valid_idx = {4, 4};
  EXPECT_THROW(validate(d, "test"), Error);
  d = make_multiclass();
  d.features.f32()[7] = std::numeric_limits<float>::infinity();
  try {
    validate(d, "my-source");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::InvalidInput);
    EXPECT_NE(error.message().find("my-source"), std::string::npos);
  }
}

// ---- GzipLineReader and field parsers ----

void write_gz(const fs::path& file, const std::string& text) {
  gzFile out = gzopen(file.string().c_str(), "wb");
  ASSERT_NE(out, nullptr);
  for (std::size_t done = 0; done < text.size();) {
    unsigned piece = static_cast<unsigned>(std::min<std::size_t>(text.size() - done, 1u << 20));
    ASSERT_EQ(gzwrite(out, text.data() + done, piece), static_cast<int>(piece));
    done += piece;
  }
  ASSERT_EQ(gzclose(out), Z_OK);
}

TEST(GzipLineReader, LinesAcrossBlocksLongLinesAndLineEnds) {
  TempDir tmp;
  std::vector<std::string> lines;
  std::string text;
  for (int i = 0; i < 200000; ++i) {  // ~2.6 MB over many 64 KiB+ blocks, odd lengths
    lines.push_back(std::to_string(i) + std::string(static_cast<std::size_t>(i % 17), 'x'));
  }
  lines.push_back(std::string(3 << 20, 'y'));  // longer than any block: the growth path
  lines.push_back("");                          // a blank line
  lines.push_back("last-without-newline");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    text += lines[i];
    if (i + 1 < lines.size()) text += (i % 3 == 0) ? "\r\n" : "\n";
  }
  write_gz(tmp.path() / "lines.gz", text);
  GzipLineReader reader(tmp.path() / "lines.gz");
  std::string_view line;
  std::size_t count = 0;
  while (reader.next_line(line)) {
    ASSERT_LT(count, lines.size());
    ASSERT_EQ(line, lines[count]) << "line " << count + 1;
    ++count;
    EXPECT_EQ(reader.line_number(), static_cast<std::int64_t>(count));
  }
  EXPECT_EQ(count, lines.size());
  EXPECT_EQ(reader.text_bytes(), text.size());
  EXPECT_FALSE(reader.next_line(line));  // stays at the end

  GzipLineReader records(tmp.path() / "lines.gz");
  std::size_t non_blank = 0;
  while (records.next_record(line)) ++non_blank;
  EXPECT_EQ(non_blank, lines.size() - 1);
}

TEST(GzipLineReader, EmptyGzipHasNoLines) {
  TempDir tmp;
  write_gz(tmp.path() / "empty.gz", "");
  GzipLineReader reader(tmp.path() / "empty.gz");
  std::string_view line;
  EXPECT_FALSE(reader.next_line(line));
  EXPECT_EQ(reader.where(), (tmp.path() / "empty.gz").string());
}

TEST(GzipLineReader, ReaderStoppedEarlyDoesNotHang) {
  TempDir tmp;
  write_gz(tmp.path() / "many.gz", std::string(20 << 20, '\n'));
  GzipLineReader reader(tmp.path() / "many.gz");
  std::string_view line;
  ASSERT_TRUE(reader.next_line(line));
}  // the destructor stops the producer while it waits for a free block

TEST(Fields, ParsersFollowPandas) {
  float value = 0.0f;
  std::int64_t integer = 0;
  EXPECT_TRUE(parse_float(" +1.5 ", value));
  EXPECT_EQ(value, 1.5f);
  EXPECT_TRUE(parse_float("1e400", value));
  EXPECT_TRUE(std::isinf(value));
  EXPECT_TRUE(parse_float("3.4028236e38", value));  // above FLT_MAX by more than half an ulp
  EXPECT_TRUE(std::isinf(value));
  EXPECT_TRUE(parse_float("NaN", value));
  EXPECT_TRUE(std::isnan(value));
  EXPECT_FALSE(parse_float("", value));
  EXPECT_FALSE(parse_float("1.5x", value));
  EXPECT_TRUE(parse_int64("-42", integer));
  EXPECT_EQ(integer, -42);
  EXPECT_FALSE(parse_int64("4.0", integer));
  EXPECT_TRUE(is_na_token("nan"));
  EXPECT_TRUE(is_na_token(""));
  EXPECT_TRUE(is_na_token("NA"));
  EXPECT_FALSE(is_na_token("0"));
  EXPECT_EQ(count_fields("1,2,,4"), 4);
  EXPECT_EQ(field_at("1,2,,4", 3), "4");
  EXPECT_EQ(field_at("1,2,,4", 2), "");
  EXPECT_EQ(describe_bad_row("1,a", 2, true), "column 2: 'a' is not an integer");
  float row[3];
  EXPECT_TRUE(parse_float_row("0.1,-2,3e-5", row, 3));
  EXPECT_EQ(row[0], 0.1f);
  EXPECT_FALSE(parse_float_row("0.1,-2", row, 3));
  EXPECT_FALSE(parse_float_row("0.1,-2,3,4", row, 3));
}

// ---- Cora ----

class Cora : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSERA_NEED_SHARED_DATASET(kCoraDir / "meta.json");
    meta_ = nlohmann::json::parse(read_bytes(kCoraDir / "meta.json"));
  }
  nlohmann::json meta_;
};

TEST_F(Cora, MatchesPublishedCounts) {
  Dataset cora = read_ogb_raw(kCoraDir);
  EXPECT_EQ(cora.name, "cora");
  EXPECT_EQ(cora.num_nodes(), 2708);
  EXPECT_EQ(cora.num_nodes(), meta_["num_nodes"].get<std::int64_t>());
  EXPECT_EQ(cora.graph.nnz(), 10556);
  EXPECT_EQ(cora.graph.nnz(), meta_["num_edges_directed_after_inverse"].get<std::int64_t>());
  EXPECT_EQ(cora.num_edge_lines, 5278);
  EXPECT_EQ(cora.num_features(), 1433);
  EXPECT_EQ(cora.num_classes, 7);
  EXPECT_EQ(cora.task, TaskType::MultiClass);
  EXPECT_EQ(cora.eval_metric, "acc");
  EXPECT_TRUE(cora.add_inverse_edge);

  std::int64_t nonzeros = 0;
  bool binary = true;
  for (std::int64_t i = 0; i < cora.features.numel(); ++i) {
    float value = cora.features.f32()[i];
    nonzeros += value != 0.0f;
    binary &= value == 0.0f || value == 1.0f;
  }
  EXPECT_EQ(nonzeros, 49216);
  EXPECT_EQ(nonzeros, meta_["feature_nonzeros"].get<std::int64_t>());
  EXPECT_TRUE(binary);

  std::vector<std::int64_t> class_counts(7, 0);
  for (std::int64_t label : cora.labels) {
    ASSERT_GE(label, 0);
    ++class_counts[label];
  }
  EXPECT_EQ(class_counts, meta_["class_counts"].get<std::vector<std::int64_t>>());
  EXPECT_EQ(cora.train_idx.size(), meta_["split_sizes"]["train"].get<std::size_t>());
  EXPECT_EQ(cora.valid_idx.size(), meta_["split_sizes"]["valid"].get<std::size_t>());
  EXPECT_EQ(cora.test_idx.size(), meta_["split_sizes"]["test"].get<std::size_t>());
  EXPECT_EQ(cora.train_idx.front(), 0);
  EXPECT_EQ(cora.train_idx.back(), 139);
  EXPECT_EQ(cora.test_idx.front(), 1708);

  // Symmetric, no self loops, sorted unique columns.
  const auto& indptr = cora.graph.indptr();
  const auto& indices = cora.graph.indices();
  for (std::int64_t v = 0; v < cora.num_nodes(); ++v) {
    for (EdgeOffset e = indptr[v]; e < indptr[v + 1]; ++e) {
      NodeId u = indices[e];
      ASSERT_NE(u, v);
      if (e > indptr[v]) {
        ASSERT_LT(indices[e - 1], u);
      }
      ASSERT_TRUE(std::binary_search(indices.begin() + indptr[u], indices.begin() + indptr[u + 1],
                                     static_cast<NodeId>(v)))
          << "edge " << u << " -> " << v << " has no reverse";
    }
  }
}

TEST_F(Cora, RoundTripIsIdenticalAndTextMatchesTheOriginal) {
  TempDir tmp;
  Dataset cora = read_ogb_raw(kCoraDir, LoadOptions{.progress = true});
  write_ogb_raw(cora, tmp.path() / "cora");
  Dataset again = read_ogb_raw(tmp.path() / "cora");
  expect_same_dataset(cora, again);
  // Same decompressed text as the converter wrote: the layout is OGB's, byte for byte.
  for (const char* file : {"raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz",
                           "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz",
                           "split/public/train.csv.gz", "split/public/valid.csv.gz",
                           "split/public/test.csv.gz"}) {
    EXPECT_EQ(gunzip(kCoraDir / file), gunzip(tmp.path() / "cora" / file)) << file;
  }
}

TEST_F(Cora, RowNormalizedRowsSumToOne) {
  Dataset cora = read_ogb_raw(kCoraDir);
  row_normalize_features(cora);
  for (std::int64_t r = 0; r < cora.num_nodes(); r += 97) {
    double sum = 0.0;
    for (std::int64_t c = 0; c < cora.num_features(); ++c) sum += cora.features.row<float>(r)[c];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;  // float rounding of up to 30 terms
  }
}

}  // namespace
}  // namespace tessera
