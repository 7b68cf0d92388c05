// SPDX-License-Identifier: Apache-2.0
// OGB's binary layout (ogbn-papers100M's raw/data.npz and raw/node-label.npz), on files NumPy
// writes (make_ogb_npz.py): the dataset equals the same one in the CSV layout, arrays stream in
// any block size, each class of bad archive is refused naming the file, the array and the
// problem, and convert_ogb streams either layout into the file write_hdf5 writes of the
// in-memory read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "datasets/dataset.h"
#include "datasets/loaders.h"
#include "datasets/npz.h"
#include "tests/shared_datasets.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// make_ogb_npz.py's output for `variant` ("good" or a defect), made once per test program.
const fs::path& made(const std::string& variant) {
  static std::map<std::string, fs::path> dirs;
  static const fs::path root = [] {
    fs::path r = fs::temp_directory_path() / ("tessera_npz_" + std::to_string(getpid()));
    fs::remove_all(r);
    struct Cleanup : ::testing::Environment {
      explicit Cleanup(fs::path p) : path(std::move(p)) {}
      void TearDown() override { fs::remove_all(path); }
      fs::path path;
    };
    ::testing::AddGlobalTestEnvironment(new Cleanup(r));
    return r;
  }();
  auto it = dirs.find(variant);
  if (it != dirs.end()) return it->second;
  const fs::path dir = root / variant;
  const std::string command = std::string(TESSERA_TEST_PYTHON) + " " + TESSERA_SOURCE_DIR +
                              "/tests/datasets/make_ogb_npz.py " + dir.string() + " " + variant;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return dirs.emplace(variant, dir).first->second;
}

// Expects `f` to throw an Error of `category` (InvalidInput unless said).
template <class F>
void expect_invalid_input(F f, ErrorCategory category = ErrorCategory::InvalidInput) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), category) << error.what();
  }
}

TEST(OgbNpz, Papers100MLayoutReadsAsItsCsvTwin) {
  const Dataset npz = read_ogb_raw(made("good") / "ogbn_papers100M");
  const Dataset csv = read_ogb_raw(made("good") / "csv");
  // The built-in row of ogbn-papers100M: 172 classes, directed, the time split.
  EXPECT_EQ(npz.name, "ogbn_papers100M");
  EXPECT_EQ(npz.num_classes, 172);
  EXPECT_FALSE(npz.add_inverse_edge);
  EXPECT_EQ(npz.num_nodes(), 300);
  EXPECT_EQ(npz.num_edge_lines, 1500);
  EXPECT_EQ(npz.num_features(), 12);
  EXPECT_EQ(npz.graph.indptr(), csv.graph.indptr());
  EXPECT_EQ(npz.graph.indices(), csv.graph.indices());
  ASSERT_EQ(npz.features.numel(), csv.features.numel());
  for (std::int64_t i = 0; i < npz.features.numel(); ++i) {
    ASSERT_EQ(npz.features.f32()[i], csv.features.f32()[i]) << "feature element " << i;
  }
  EXPECT_EQ(npz.labels, csv.labels);
  EXPECT_GT(std::count(npz.labels.begin(), npz.labels.end(), -1), 0) << "NaN labels: none";
  EXPECT_EQ(npz.train_idx, csv.train_idx);
  EXPECT_EQ(npz.valid_idx, csv.valid_idx);
  EXPECT_EQ(npz.test_idx, csv.test_idx);
  EXPECT_EQ(fingerprint(npz), fingerprint(csv));
  // load_dataset takes the folder as it takes any OGB folder.
  EXPECT_EQ(fingerprint(load_dataset((made("good") / "ogbn_papers100M").string())),
            fingerprint(npz));
}

TEST(OgbNpz, ArraysStreamInAnyBlockSize) {
  const npz::Archive data(made("good") / "ogbn_papers100M" / "raw" / "data.npz");
  EXPECT_EQ(data.names(), (std::vector<std::string>{"edge_index", "node_feat", "node_year",
                                                    "num_nodes_list", "num_edges_list"}));
  EXPECT_TRUE(data.has("node_year"));
  EXPECT_FALSE(data.has("edge_feat"));
  npz::ArrayReader whole = data.open("edge_index");
  EXPECT_EQ(whole.info().descr, "<i8");
  EXPECT_EQ(whole.info().shape, (std::vector<std::int64_t>{2, 1500}));
  std::vector<std::int64_t> all(3000);
  whole.read_int64(all.data(), 3000);
  EXPECT_EQ(whole.remaining(), 0);
  npz::ArrayReader pieces = data.open("edge_index");
  std::vector<std::int64_t> piecewise(3000);
  for (std::int64_t at = 0; at < 3000; at += 7) {
    pieces.read_int64(piecewise.data() + at, std::min<std::int64_t>(7, 3000 - at));
  }
  EXPECT_EQ(piecewise, all);
  // Integers read as doubles exactly; floats are refused as integers and the reverse.
  npz::ArrayReader years = data.open("node_year");
  std::vector<double> as_double(300);
  years.read_f64(as_double.data(), 300);
  EXPECT_GE(as_double[0], 1990.0);
  std::vector<float> f(1);
  expect_invalid_input([&] { data.open("edge_index").read_f32(f.data(), 1); });
  std::int64_t i = 0;
  expect_invalid_input([&] { data.open("node_feat").read_int64(&i, 1); });
}

// The converter's file against the in-memory read of the same folder, array for array.
// The file goes beside `dir` unless `out_dir` is given.
void expect_converted_equal(const fs::path& dir, std::int64_t memory_bytes, fs::path out_dir = {}) {
  if (out_dir.empty()) out_dir = dir.parent_path();
  const fs::path file = out_dir / ("converted_" + std::to_string(memory_bytes) + ".h5");
  convert_ogb(dir, file, ConvertOptions{.memory_bytes = memory_bytes});
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
  EXPECT_FALSE(fs::exists(file.string() + ".buckets")) << "sorting buckets left behind";
  const Dataset want = read_ogb_raw(dir);
  const Dataset got = read_hdf5(file);  // checks the stored fingerprint against the contents
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.task, want.task);
  EXPECT_EQ(got.num_classes, want.num_classes);
  EXPECT_EQ(got.num_tasks, want.num_tasks);
  EXPECT_EQ(got.add_inverse_edge, want.add_inverse_edge);
  EXPECT_EQ(got.num_edge_lines, want.num_edge_lines);
  EXPECT_EQ(got.graph.indptr(), want.graph.indptr());
  EXPECT_EQ(got.graph.indices(), want.graph.indices());
  ASSERT_EQ(got.features.numel(), want.features.numel());
  EXPECT_EQ(std::memcmp(got.features.raw(), want.features.raw(),
                        static_cast<std::size_t>(want.features.numel()) * 4),
            0);
  EXPECT_EQ(got.labels, want.labels);
  ASSERT_EQ(got.targets.numel(), want.targets.numel());
  for (std::int64_t i = 0; i < want.targets.numel(); ++i) {
    const float a = got.targets.f32()[i], b = want.targets.f32()[i];
    EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << "target " << i;
  }
  EXPECT_EQ(got.train_idx, want.train_idx);
  EXPECT_EQ(got.valid_idx, want.valid_idx);
  EXPECT_EQ(got.test_idx, want.test_idx);
  EXPECT_EQ(fingerprint(got), fingerprint(want));
}

// Budgets from one sorting bucket to about twenty (4 KiB: 2 KiB to sort, about 170 entries per
// bucket), directed and with the inverse edges added, multi-class and multi-label, in both
// layouts.
TEST(OgbNpz, ConvertedFileEqualsTheInMemoryRead) {
  for (const char* variant : {"good", "inverse", "multilabel"}) {
    for (const char* layout : {"ogbn_papers100M", "csv"}) {
      for (const std::int64_t memory : {std::int64_t{4096}, std::int64_t{1} << 30}) {
        SCOPED_TRACE(std::string(variant) + ", " + layout + ", " + std::to_string(memory) +
                     " bytes");
        expect_converted_equal(made(variant) / layout, memory);
      }
    }
  }
}

// A real dataset in the CSV layout (Cora: inverse edges added, 1,433 features), converted in a
// budget that sorts it in several buckets.
TEST(OgbNpz, CoraConvertsAsItReads) {
  const fs::path cora = fs::path(TESSERA_SHARED_DATASETS) / "cora";
  TESSERA_NEED_SHARED_DATASET(cora);
  expect_converted_equal(cora, 64 << 10, made("good").parent_path());
}

// A bad archive fails the conversion as it fails the read, and leaves no file behind.
TEST(OgbNpz, ConversionOfABadArchiveLeavesNothing) {
  for (const char* variant : {"source_out_of_range", "label_fraction", "short_data"}) {
    SCOPED_TRACE(variant);
    const fs::path dir = made(variant) / "ogbn_papers100M";
    const fs::path file = made(variant) / "out.h5";
    expect_invalid_input([&] { convert_ogb(dir, file); });
    EXPECT_EQ(std::distance(fs::directory_iterator(made(variant)), fs::directory_iterator()), 1)
        << "the conversion left files beside " << dir;
  }
  expect_invalid_input([&] { convert_ogb(made("good") / "nowhere", made("good") / "x.h5"); },
                       ErrorCategory::Io);
  EXPECT_FALSE(fs::exists(made("good") / "x.h5"));
}

// Reads `dir` and expects InvalidInput whose message holds every piece.
void expect_refused(const fs::path& dir, const std::vector<std::string>& pieces) {
  try {
    read_ogb_raw(dir);
    ADD_FAILURE() << dir << ": read without an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::InvalidInput) << error.what();
    const std::string message = error.what();
    for (const std::string& piece : pieces) {
      EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
    }
  }
}

TEST(OgbNpz, EachBadArchiveIsRefusedByName) {
  const std::string data = "data.npz", labels = "node-label.npz";
  const std::map<std::string, std::vector<std::string>> cases = {
      {"several_graphs", {data, "num_nodes_list.npy", "2 entries; expected one"}},
      {"source_out_of_range", {data, "edge_index.npy", "edge 17 has source 300", "[0, 300)"}},
      {"negative_destination", {data, "edge_index.npy", "edge 3 has destination -2"}},
      {"edges_transposed", {data, "edge_index.npy", "shape (1500, 2)", "expected (2, 1500)"}},
      {"edges_as_floats", {data, "edge_index.npy", "'<f8' holds floats; expected integers"}},
      {"fortran_order", {data, "node_feat.npy", "fortran_order is True"}},
      {"big_endian", {data, "edge_index.npy", "'>i8' is big-endian"}},
      {"feature_rows", {data, "node_feat.npy", "shape (299, 12)", "expected (300, F)"}},
      {"no_features", {data, "no array 'node_feat'", "edge_index, node_year"}},
      {"label_out_of_range", {labels, "node_label.npy", "node 5 has label 172", "[0, 172)"}},
      {"label_fraction", {labels, "node 8 has label 2.5"}},
      {"structured_labels", {labels, "node_label.npy", "structured arrays are not supported"}},
      {"truncated", {data, "not a readable .npz archive"}},
      {"short_data", {data, "edge_index.npy", "truncated"}},
      {"not_a_zip", {data, "not a readable .npz archive"}},
      {"corrupt_stored", {data, "node_feat.npy", "CRC"}},
  };
  for (const auto& [variant, pieces] : cases) {
    SCOPED_TRACE(variant);
    expect_refused(made(variant) / "ogbn_papers100M", pieces);
  }
}

TEST(OgbNpz, HeaderParsing) {
  std::size_t offset = 0;
  auto header = [](const std::string& dict) {
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(dict.size() & 0xFF);
    bytes += static_cast<char>(dict.size() >> 8);
    return bytes + dict;
  };
  const npz::ArrayInfo info = npz::parse_header(
      header("{'descr': '<u2', 'fortran_order': False, 'shape': (3, 4, 5), }"), "x", &offset);
  EXPECT_EQ(info.kind, 'u');
  EXPECT_EQ(info.item_size, 2);
  EXPECT_EQ(info.shape, (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(info.count(), 60);
  EXPECT_EQ(offset, 10 + 62u);
  // Version 2: a 4-byte header length.
  const std::string dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }";
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) v2 += static_cast<char>((dict.size() >> (8 * i)) & 0xFF);
  const npz::ArrayInfo info2 = npz::parse_header(v2 + dict, "x", &offset);
  EXPECT_EQ(info2.kind, 'b');
  EXPECT_EQ(info2.shape, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(offset, 12 + dict.size());
  EXPECT_EQ(npz::parse_header(header("{'descr': '<f4', 'fortran_order': False, 'shape': (), }"),
                              "x", &offset)
                .count(),
            1);
  expect_invalid_input([&] { npz::parse_header("PK\x03\x04 not npy", "x", &offset); });
  for (const char* bad : {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
                          "{'descr': '<i8', 'fortran_order': False, 'shape': (-2,), }",
                          "{'descr': '<i8', 'shape': (2,), }"}) {
    SCOPED_TRACE(bad);
    expect_invalid_input([&] { npz::parse_header(header(bad), "x", &offset); });
  }
}

}  // namespace
}  // namespace tessera
