// SPDX-License-Identifier: Apache-2.0
// Tests of the Tessera HDF5 dataset format: bitwise round trips (synthetic, multi-label with
// NaN targets, Cora from ../shared/datasets when present) and refusal of bad files (missing,
// not HDF5, not a Tessera dataset, wrong version, missing dataset, wrong dtype or shape, bad
// indices, corrupted contents), each checked for its category and for naming file and path.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "datasets/loaders.h"
#include "datasets/synthetic.h"
#include "tests/shared_datasets.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class Hdf5Test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_test_hdf5_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

SyntheticConfig small_config() {
  SyntheticConfig c = synthetic_preset("default");
  c.num_nodes = 500;
  c.num_edges = 2000;
  c.num_features = 7;
  c.num_classes = 4;
  return c;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.same_shape(b) && a.dtype() == b.dtype() &&
         (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

void expect_identical(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.eval_metric, b.eval_metric);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.num_tasks, b.num_tasks);
  EXPECT_EQ(a.add_inverse_edge, b.add_inverse_edge);
  EXPECT_EQ(a.num_edge_lines, b.num_edge_lines);
  EXPECT_EQ(a.graph.num_rows(), b.graph.num_rows());
  EXPECT_EQ(a.graph.num_cols(), b.graph.num_cols());
  EXPECT_EQ(a.graph.indptr(), b.graph.indptr());
  EXPECT_EQ(a.graph.indices(), b.graph.indices());
  EXPECT_TRUE(same_tensor(a.features, b.features));
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_TRUE(same_tensor(a.targets, b.targets));
  EXPECT_EQ(a.train_idx, b.train_idx);
  EXPECT_EQ(a.valid_idx, b.valid_idx);
  EXPECT_EQ(a.test_idx, b.test_idx);
  EXPECT_EQ(fingerprint(a), fingerprint(b));
}

// Expects read_hdf5(file) to throw `category` with a message containing every one of `parts`.
void expect_refused(const fs::path& file, ErrorCategory category,
                    const std::vector<std::string>& parts) {
  try {
    read_hdf5(file);
    ADD_FAILURE() << "read_hdf5(" << file << ") did not throw";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), category) << error.what();
    for (const std::string& part : parts) {
      EXPECT_NE(error.message().find(part), std::string::npos)
          << "message lacks '" << part << "': " << error.message();
    }
  }
}

// Small HDF5 edits used to corrupt a valid file.
class Hdf5Edit {
 public:
  explicit Hdf5Edit(const fs::path& file)
      : file_(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) {
    EXPECT_GE(file_, 0);
  }
  ~Hdf5Edit() { H5Fclose(file_); }
  void remove(const char* path) { EXPECT_GE(H5Ldelete(file_, path, H5P_DEFAULT), 0); }
  // Replaces `path` by a 1-D dataset of `type` holding `values` (converted from int64).
  void replace_1d(const char* path, hid_t type, const std::vector<std::int64_t>& values) {
    remove(path);
    hsize_t dims[1] = {values.size()};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t dataset = H5Dcreate2(file_, path, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Dwrite(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    H5Dclose(dataset);
    H5Sclose(space);
  }
  // Replaces `path` by a 1-D dataset of `type` and `length` entries that holds `values` from
  // entry `offset` on and was never written elsewhere: contiguous storage of the full length
  // without a fill value, so that a file system with sparse files keeps the rest as a hole and
  // the length can pass 2^31 at the disk cost of the values.
  void replace_sparse_1d(const char* path, hid_t type, std::int64_t length, std::int64_t offset,
                         const std::vector<std::int64_t>& values) {
    remove(path);
    hsize_t dims[1] = {static_cast<hsize_t>(length)};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t create = H5Pcreate(H5P_DATASET_CREATE);
    EXPECT_GE(H5Pset_fill_time(create, H5D_FILL_TIME_NEVER), 0);
    hid_t dataset = H5Dcreate2(file_, path, type, space, H5P_DEFAULT, create, H5P_DEFAULT);
    hsize_t start[1] = {static_cast<hsize_t>(offset)}, count[1] = {values.size()};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t memory = H5Screate_simple(1, count, nullptr);
    EXPECT_GE(H5Dwrite(dataset, H5T_NATIVE_INT64, memory, space, H5P_DEFAULT, values.data()), 0);
    H5Sclose(memory);
    H5Dclose(dataset);
    H5Pclose(create);
    H5Sclose(space);
  }
  // Overwrites element `index` of a 1-D dataset (int64 in memory, converted on write).
  void set_element(const char* path, hsize_t index, std::int64_t value) {
    hid_t dataset = H5Dopen2(file_, path, H5P_DEFAULT);
    hid_t space = H5Dget_space(dataset);
    hsize_t start[1] = {index}, count[1] = {1};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t memory = H5Screate_simple(1, count, nullptr);
    EXPECT_GE(H5Dwrite(dataset, H5T_NATIVE_INT64, memory, space, H5P_DEFAULT, &value), 0);
    H5Sclose(memory);
    H5Sclose(space);
    H5Dclose(dataset);
  }
  void set_first_float(const char* path, float value) {
    hid_t dataset = H5Dopen2(file_, path, H5P_DEFAULT);
    hid_t space = H5Dget_space(dataset);
    hsize_t start[2] = {0, 0}, count[2] = {1, 1};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t memory = H5Screate_simple(2, count, nullptr);
    EXPECT_GE(H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory, space, H5P_DEFAULT, &value), 0);
    H5Sclose(memory);
    H5Sclose(space);
    H5Dclose(dataset);
  }
  void set_int_attribute(const char* name, std::int64_t value) {
    hid_t attr = H5Aopen(file_, name, H5P_DEFAULT);
    EXPECT_GE(H5Awrite(attr, H5T_NATIVE_INT64, &value), 0);
    H5Aclose(attr);
  }

 private:
  hid_t file_;
};

// Rows read as slices: for 1, 3 and 7 ranges covering the graph, the slices put together are
// the whole dataset (CSR rows with global columns, feature rows, labels or targets, the split
// ids of each range in the file's order); a range outside the graph is refused.
TEST_F(Hdf5Test, SlicesOfRowsPutTogetherAreTheWhole) {
  for (const bool multilabel : {false, true}) {
    Dataset d = generate_synthetic(small_config());
    if (multilabel) {
      d.task = TaskType::MultiLabel;
      d.eval_metric = "rocauc";
      d.num_tasks = 3;
      d.targets = Tensor(d.num_nodes(), 3);
      for (std::int64_t i = 0; i < d.targets.numel(); ++i)
        d.targets.f32()[i] = i % 11 == 0 ? std::numeric_limits<float>::quiet_NaN()
                                         : static_cast<float>(i % 2);
      d.labels.clear();
    }
    const fs::path file = dir_ / "slices.h5";
    write_hdf5(d, file);
    const std::int64_t n = d.num_nodes();
    for (const std::int64_t parts : {1, 3, 7}) {
      SCOPED_TRACE(std::to_string(parts) + " slices" + (multilabel ? ", multi-label" : ""));
      std::vector<EdgeOffset> indptr = {0};
      std::vector<NodeId> indices;
      std::vector<float> features, targets;
      std::vector<std::int64_t> labels;
      std::vector<GlobalId> train, valid, test;
      for (std::int64_t p = 0; p < parts; ++p) {
        const DatasetSlice s = read_hdf5_rows(file, n * p / parts, n * (p + 1) / parts);
        EXPECT_EQ(s.num_nodes, n);
        EXPECT_EQ(s.fingerprint, fingerprint(d));
        EXPECT_EQ(s.rows.num_cols(), n);
        for (std::int64_t r = 0; r < s.rows.num_rows(); ++r)
          indptr.push_back(indptr.back() + s.rows.indptr()[r + 1] - s.rows.indptr()[r]);
        indices.insert(indices.end(), s.rows.indices().begin(), s.rows.indices().end());
        features.insert(features.end(), s.features.f32(), s.features.f32() + s.features.numel());
        if (multilabel) {
          targets.insert(targets.end(), s.targets.f32(), s.targets.f32() + s.targets.numel());
        }
        labels.insert(labels.end(), s.labels.begin(), s.labels.end());
        train.insert(train.end(), s.train_idx.begin(), s.train_idx.end());
        valid.insert(valid.end(), s.valid_idx.begin(), s.valid_idx.end());
        test.insert(test.end(), s.test_idx.begin(), s.test_idx.end());
      }
      EXPECT_EQ(indptr, d.graph.indptr());
      EXPECT_EQ(indices, d.graph.indices());
      EXPECT_EQ(features,
                std::vector<float>(d.features.f32(), d.features.f32() + d.features.numel()));
      EXPECT_EQ(labels, d.labels);
      ASSERT_EQ(targets.size(), static_cast<std::size_t>(d.targets.numel()));
      if (!targets.empty()) {
        EXPECT_EQ(std::memcmp(targets.data(), d.targets.raw(), targets.size() * 4), 0);
      }
      auto sorted = [](std::vector<GlobalId> v) {
        std::sort(v.begin(), v.end());
        return v;
      };
      EXPECT_EQ(sorted(train), sorted(d.train_idx));
      EXPECT_EQ(sorted(valid), sorted(d.valid_idx));
      EXPECT_EQ(sorted(test), sorted(d.test_idx));
    }
    using Range = std::pair<std::int64_t, std::int64_t>;
    for (const auto& [begin, end] : {Range{0, n + 1}, Range{5, 4}, Range{-1, 3}}) {
      try {
        read_hdf5_rows(file, begin, end);
        ADD_FAILURE() << "rows " << begin << ".." << end << " were read";
      } catch (const Error& error) {
        EXPECT_EQ(error.category(), ErrorCategory::InvalidArgument);
        EXPECT_NE(std::string(error.what()).find("not a range of its"), std::string::npos);
      }
    }
  }
}

// What the partitioning rank reads of a file whose ranks read their own feature rows: the
// dataset less its features, with the whole file's fingerprint checked by streaming them; then
// any rows in any order, read back as they are in the file.
// Offsets past 2^31 in every read of a stretch of rows: the graph's entries moved 2^31 + 3
// places on in a /graph/indices that many entries longer (a hole in a sparse file, so that the
// gap takes no disk), and row 0 stretched over the gap. Rows 1..N, read as slices and through
// Hdf5GraphReader, come back equal to the original's, and a range that starts past the
// original's entry count names the offsets.
TEST_F(Hdf5Test, RowsPastTwoToTheThirtyOneEntries) {
  const Dataset d = generate_synthetic(small_config());
  const fs::path file = dir_ / "offsets.h5";
  write_hdf5(d, file);
  const std::int64_t gap = (std::int64_t{1} << 31) + 3, n = d.num_nodes(), nnz = d.graph.nnz();
  const std::vector<EdgeOffset>& indptr = d.graph.indptr();
  std::vector<std::int64_t> moved(indptr.begin(), indptr.end());
  for (std::size_t i = 1; i < moved.size(); ++i) moved[i] += gap;
  {
    Hdf5Edit edit(file);
    edit.replace_1d("/graph/indptr", H5T_STD_I64LE, moved);
    edit.replace_sparse_1d("/graph/indices", H5T_STD_I32LE, gap + nnz, gap,
                           {d.graph.indices().begin(), d.graph.indices().end()});
  }
  const auto expect_rows = [&](const Csr& rows, std::int64_t begin) {
    for (std::int64_t r = 0; r < rows.num_rows(); ++r) {
      const auto from = d.graph.indices().begin() + indptr[begin + r];
      const std::vector<NodeId> want(from, from + (indptr[begin + r + 1] - indptr[begin + r]));
      const std::vector<NodeId> got(rows.indices().begin() + rows.indptr()[r],
                                    rows.indices().begin() + rows.indptr()[r + 1]);
      ASSERT_EQ(got, want) << "row " << begin + r;
    }
  };
  for (const std::int64_t begin : {std::int64_t{1}, n / 2, n - 1}) {
    SCOPED_TRACE("rows from " + std::to_string(begin));
    const DatasetSlice s = read_hdf5_rows(file, begin, n);
    EXPECT_EQ(s.rows.num_rows(), n - begin);
    EXPECT_EQ(s.rows.nnz(), nnz - indptr[static_cast<std::size_t>(begin)]);
    expect_rows(s.rows, begin);
  }
  {
    Hdf5GraphReader reader(file);
    EXPECT_EQ(reader.num_entries(), gap + nnz);
    const std::vector<EdgeOffset> starts = reader.row_starts(1, n);
    EXPECT_EQ(starts, std::vector<EdgeOffset>(moved.begin() + 1, moved.end()));
    expect_rows(reader.rows(3, n), 3);
    for (const EdgeOffset e : {EdgeOffset{0}, nnz / 2, nnz - 1}) {
      EXPECT_EQ(reader.column(gap + e), d.graph.indices()[static_cast<std::size_t>(e)]);
    }
  }
  Hdf5Edit(file).set_element("/graph/indptr", static_cast<hsize_t>(n), gap + nnz + 1);
  try {
    read_hdf5_rows(file, n - 1, n);
    ADD_FAILURE() << "an offset past the entries was read";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::InvalidInput);
    EXPECT_NE(error.message().find("of " + std::to_string(gap + nnz)), std::string::npos)
        << error.message();
  }
}

TEST_F(Hdf5Test, FeaturesStayInTheFileUntilTheirRowsAreAsked) {
  SyntheticConfig config = small_config();
  config.num_features = 1000;  // 4 kB a row: the 16 MiB spans hold 4,194 rows, so several reads
  config.num_nodes = 9000;
  const Dataset d = generate_synthetic(config);
  const fs::path file = dir_ / "owners.h5";
  write_hdf5(d, file);
  const DatasetWithoutFeatures without = read_hdf5_without_features(file);
  EXPECT_EQ(without.num_features, 1000);
  EXPECT_EQ(without.fingerprint, fingerprint(d));
  EXPECT_EQ(without.dataset.features.rows(), d.num_nodes());
  EXPECT_EQ(without.dataset.features.cols(), 0);
  EXPECT_EQ(without.dataset.graph.indices(), d.graph.indices());
  EXPECT_EQ(without.dataset.labels, d.labels);
  EXPECT_EQ(without.dataset.train_idx, d.train_idx);
  EXPECT_EQ(fingerprint(without.dataset, 1000,
                        [&](Hasher& hasher) {
                          hasher.add_piece(std::span<const float>(
                              d.features.f32(), static_cast<std::size_t>(d.features.numel())));
                        }),
            fingerprint(d));

  const std::vector<GlobalId> ids = {8999, 0, 17, 4500, 16, 8998, 4194, 3};
  const Tensor rows = read_hdf5_feature_rows(file, ids, fingerprint(d));
  ASSERT_EQ(rows.rows(), 8);
  ASSERT_EQ(rows.cols(), 1000);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(std::memcmp(rows.row<float>(static_cast<std::int64_t>(i)),
                          d.features.row<float>(ids[i]), 4000),
              0)
        << "row of node " << ids[i];
  }
  EXPECT_EQ(read_hdf5_feature_rows(file, {}, fingerprint(d)).rows(), 0);

  auto expect_error = [](auto f, ErrorCategory category, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), category) << error.what();
      EXPECT_NE(error.message().find(part), std::string::npos) << error.message();
    }
  };
  const std::vector<GlobalId> outside = {5, 9000};
  expect_error([&] { read_hdf5_feature_rows(file, outside, fingerprint(d)); },
               ErrorCategory::InvalidArgument, "feature row 9000");
  expect_error([&] { read_hdf5_feature_rows(file, ids, fingerprint(d) ^ 1); },
               ErrorCategory::InvalidInput, "was replaced");
  // A feature changed in the file: the streamed fingerprint check sees it.
  Hdf5Edit(file).set_first_float("/features", 123.5f);
  expect_error([&] { read_hdf5_without_features(file); }, ErrorCategory::InvalidInput,
               "fingerprint mismatch");
}

TEST_F(Hdf5Test, SyntheticRoundTripIsBitwise) {
  const Dataset d = generate_synthetic(synthetic_preset("default"));
  const fs::path file = dir_ / "default.h5";
  write_hdf5(d, file);
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
  expect_identical(d, read_hdf5(file));
  // Overwriting an existing file works and gives the new contents.
  const Dataset other = generate_synthetic(small_config());
  write_hdf5(other, file);
  expect_identical(other, read_hdf5(file));
}

TEST_F(Hdf5Test, MultiLabelRoundTripKeepsNaN) {
  Dataset d;
  d.name = "multilabel";
  d.task = TaskType::MultiLabel;
  d.eval_metric = "rocauc";
  d.num_tasks = 3;
  d.add_inverse_edge = false;
  d.graph = Csr(4, 4, {0, 1, 3, 3, 4}, {1, 0, 3, 2});
  d.num_edge_lines = 4;
  d.features = Tensor(4, 2);
  d.targets = Tensor(4, 3);
  for (int i = 0; i < 8; ++i) d.features.f32()[i] = 0.25f * i - 1.0f;
  for (int i = 0; i < 12; ++i) {
    d.targets.f32()[i] = i % 5 == 0 ? std::numeric_limits<float>::quiet_NaN() : float(i % 2);
  }
  d.train_idx = {0, 2};
  d.valid_idx = {1};
  d.test_idx = {};
  const fs::path file = dir_ / "multilabel.h5";
  write_hdf5(d, file);
  expect_identical(d, read_hdf5(file));
}

TEST_F(Hdf5Test, CoraRawRoundTripIsBitwise) {
  const fs::path cora = fs::path(TESSERA_SHARED_DATASETS) / "cora";
  TESSERA_NEED_SHARED_DATASET(cora);
  const Dataset d = read_ogb_raw(cora);
  const fs::path file = dir_ / "cora.h5";
  write_hdf5(d, file);
  expect_identical(d, read_hdf5(file));
}

// A path that names nothing is a bad argument (train_gcn's usage status), as a missing folder is.
TEST_F(Hdf5Test, MissingFileIsABadArgument) {
  const fs::path file = dir_ / "absent.h5";
  expect_refused(file, ErrorCategory::InvalidArgument, {file.string(), "no such file"});
}

TEST_F(Hdf5Test, NonHdf5FileIsInvalidInput) {
  const fs::path file = dir_ / "text.h5";
  std::ofstream(file) << "this is not an HDF5 file\n";
  expect_refused(file, ErrorCategory::InvalidInput, {file.string(), "not an HDF5 file"});
}

TEST_F(Hdf5Test, ForeignHdf5FileIsNotATesseraDataset) {
  const fs::path file = dir_ / "foreign.h5";
  H5Fclose(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  expect_refused(file, ErrorCategory::InvalidInput, {file.string(), "not a Tessera dataset"});
}

TEST_F(Hdf5Test, WrongVersionIsRefused) {
  const fs::path file = dir_ / "version.h5";
  write_hdf5(generate_synthetic(small_config()), file);
  Hdf5Edit(file).set_int_attribute("format_version", 99);
  expect_refused(file, ErrorCategory::InvalidInput, {file.string(), "version 99"});
}

TEST_F(Hdf5Test, MissingFeaturesIsRefused) {
  const fs::path file = dir_ / "nofeatures.h5";
  write_hdf5(generate_synthetic(small_config()), file);
  Hdf5Edit(file).remove("/features");
  expect_refused(file, ErrorCategory::InvalidInput, {file.string(), "/features", "missing"});
}

TEST_F(Hdf5Test, MissingGroupIsRefused) {
  const fs::path file = dir_ / "nosplit.h5";
  write_hdf5(generate_synthetic(small_config()), file);
  Hdf5Edit(file).remove("/split");
  expect_refused(file, ErrorCategory::InvalidInput, {file.string(), "/split/train", "missing"});
}

TEST_F(Hdf5Test, WrongDtypeIsRefused) {
  const Dataset d = generate_synthetic(small_config());
  const fs::path file = dir_ / "dtype.h5";
  write_hdf5(d, file);
  std::vector<std::int64_t> indices(d.graph.indices().begin(), d.graph.indices().end());
  Hdf5Edit(file).replace_1d("/graph/indices", H5T_STD_I64LE, indices);
  expect_refused(file, ErrorCategory::InvalidInput,
                 {file.string(), "/graph/indices", "expected int32", "found int64"});
}

TEST_F(Hdf5Test, WrongShapeIsRefused) {
  const Dataset d = generate_synthetic(small_config());
  const fs::path file = dir_ / "shape.h5";
  write_hdf5(d, file);
  Hdf5Edit(file).replace_1d("/features", H5T_IEEE_F32LE, std::vector<std::int64_t>(500, 1));
  expect_refused(file, ErrorCategory::InvalidInput, {file.string(), "/features", "dimension"});
  write_hdf5(d, file);
  Hdf5Edit(file).replace_1d("/labels", H5T_STD_I64LE, {0, 1, 2});
  expect_refused(file, ErrorCategory::InvalidInput, {file.string(), "/labels", "expected 500"});
}

TEST_F(Hdf5Test, IndexOutOfRangeIsRefused) {
  const fs::path file = dir_ / "range.h5";
  write_hdf5(generate_synthetic(small_config()), file);
  Hdf5Edit(file).set_element("/graph/indices", 3, 500 + 5);
  expect_refused(file, ErrorCategory::InvalidInput, {file.string(), "/graph"});
}

TEST_F(Hdf5Test, LabelOutOfRangeIsRefused) {
  const fs::path file = dir_ / "label.h5";
  write_hdf5(generate_synthetic(small_config()), file);
  Hdf5Edit(file).set_element("/labels", 7, 42);
  expect_refused(file, ErrorCategory::InvalidInput, {file.string()});
}

TEST_F(Hdf5Test, ModifiedContentsFailTheFingerprint) {
  const fs::path file = dir_ / "fingerprint.h5";
  write_hdf5(generate_synthetic(small_config()), file);
  Hdf5Edit(file).set_first_float("/features", 123.5f);
  expect_refused(file, ErrorCategory::InvalidInput, {file.string(), "fingerprint"});
}

TEST_F(Hdf5Test, UnwritablePathIsIoAndLeavesNothing) {
  const fs::path blocker = dir_ / "plain_file";
  std::ofstream(blocker) << "x";
  const fs::path file = blocker / "sub" / "out.h5";
  try {
    write_hdf5(generate_synthetic(small_config()), file);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::Io) << error.what();
    EXPECT_NE(error.message().find(file.string()), std::string::npos) << error.message();
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace tessera
