// SPDX-License-Identifier: Apache-2.0
// One test per class of malformed OGB raw-layout input: each builds a small valid dataset as
// gzip text files in a temp dir (zlib gzopen), breaks one thing, and checks that read_ogb_raw
// throws the right tessera::Error category with the file name and line number in the message,
// and that the streaming converter (convert_ogb) refuses it alike.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "datasets/loaders.h"
#include "core/error.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

void write_gz(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  gzFile out = gzopen(file.string().c_str(), "wb");
  ASSERT_NE(out, nullptr) << file;
  if (!text.empty()) {
    ASSERT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())),
              static_cast<int>(text.size()));
  }
  ASSERT_EQ(gzclose(out), Z_OK);
}

// A valid 6-node dataset as text; each test edits one entry and writes the lot.
class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("tessera_bad_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    fs::remove_all(root_);
    dir_ = root_ / "tiny";
    files_ = {
        {"meta.json",
         R"({"add_inverse_edge": true, "split": "public", "num_classes": 3,
  "task_type": "multiclass classification", "eval_metric": "acc"})"},
        {"raw/num-node-list.csv.gz", "6\n"},
        {"raw/num-edge-list.csv.gz", "5\n"},
        {"raw/edge.csv.gz", "0,1\n1,2\n2,3\n3,4\n4,5\n"},
        {"raw/node-feat.csv.gz",
         "0.5,1.0,-2.25\n0.0,0.0,1.0\n1e-3,2.0,3.0\n4,5,6\n0.1,0.2,0.3\n-1.0,-2.0,-3.0\n"},
        {"raw/node-label.csv.gz", "0\n1\n2\nnan\n1\n0\n"},
        {"split/public/train.csv.gz", "0\n1\n"},
        {"split/public/valid.csv.gz", "2\n"},
        {"split/public/test.csv.gz", "4\n5\n"},
    };
  }
  void TearDown() override { fs::remove_all(root_); }

  void write_all() {
    for (const auto& [name, text] : files_) {
      if (name.ends_with(".gz")) {
        write_gz(dir_ / name, text);
      } else {
        fs::create_directories((dir_ / name).parent_path());
        std::ofstream(dir_ / name) << text;
      }
    }
  }

  // Writes the files, reads them, and checks the error's category and message fragments; the
  // streaming converter refuses them alike and leaves nothing beside the folder (its budget of
  // 4 KiB sorts in several buckets).
  void expect_refused(ErrorCategory category, const std::vector<std::string>& fragments) {
    write_all();
    expect_error([&] { read_ogb_raw(dir_); }, category, fragments);
    SCOPED_TRACE("convert_ogb");
    expect_error([&] { convert_ogb(dir_, root_ / "out.h5", ConvertOptions{.memory_bytes = 4096}); },
                 category, fragments);
    for (const fs::directory_entry& entry : fs::directory_iterator(root_)) {
      EXPECT_EQ(entry.path().filename(), dir_.filename()) << "left behind: " << entry.path();
    }
  }

  static void expect_error(const std::function<void()>& action, ErrorCategory category,
                           const std::vector<std::string>& fragments) {
    try {
      action();
      ADD_FAILURE() << "expected tessera::Error (" << to_string(category) << ")";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), category) << error.what();
      for (const std::string& fragment : fragments) {
        EXPECT_NE(error.message().find(fragment), std::string::npos)
            << "message lacks '" << fragment << "': " << error.message();
      }
    }
  }

  fs::path root_;
  fs::path dir_;
  std::map<std::string, std::string> files_;
};

TEST_F(BadInput, ValidBaselineReads) {
  write_all();
  convert_ogb(dir_, root_ / "out.h5", ConvertOptions{.memory_bytes = 4096});
  EXPECT_EQ(fingerprint(read_hdf5(root_ / "out.h5")), fingerprint(read_ogb_raw(dir_)));
  Dataset d = read_ogb_raw(dir_);
  EXPECT_EQ(d.num_nodes(), 6);
  EXPECT_EQ(d.graph.nnz(), 10);
  EXPECT_EQ(d.labels[3], -1);
  EXPECT_EQ(d.features.row<float>(2)[0], 1e-3f);
}

TEST_F(BadInput, MissingDirectory) {
  expect_error([&] { read_ogb_raw(root_ / "nowhere"); }, ErrorCategory::Io,
               {"nowhere", "not found"});
}

TEST_F(BadInput, MissingFile) {
  files_.erase("raw/edge.csv.gz");
  expect_refused(ErrorCategory::Io, {"raw/edge.csv.gz", "not found"});
}

TEST_F(BadInput, MissingSplitFile) {
  files_.erase("split/public/valid.csv.gz");
  expect_refused(ErrorCategory::Io, {"split/public/valid.csv.gz", "not found"});
}

TEST_F(BadInput, TruncatedGzip) {
  std::string features;
  for (int r = 0; r < 6; ++r) features += "0.5,1.0,-2.25\n";
  files_["raw/node-feat.csv.gz"] = features;
  write_all();
  fs::path file = dir_ / "raw/node-feat.csv.gz";
  fs::resize_file(file, fs::file_size(file) - 6);  // cut into the CRC/length trailer
  expect_error([&] { read_ogb_raw(dir_); }, ErrorCategory::InvalidInput,
               {"node-feat.csv.gz:", "truncated or corrupt gzip", "zlib"});
}

TEST_F(BadInput, CorruptGzip) {
  std::string edges;
  for (int i = 0; i < 5000; ++i) edges += std::to_string(i % 5) + "," + std::to_string(i % 5 + 1) + "\n";
  files_["raw/edge.csv.gz"] = edges;
  files_["raw/num-edge-list.csv.gz"] = "5000\n";
  write_all();
  fs::path file = dir_ / "raw/edge.csv.gz";
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
  io.write("\xff\x00\xff\x00\xff\x00", 6);
  io.close();
  expect_error([&] { read_ogb_raw(dir_); }, ErrorCategory::InvalidInput,
               {"edge.csv.gz:", "truncated or corrupt gzip"});
}

TEST_F(BadInput, NotGzipAtAll) {
  write_all();
  std::ofstream(dir_ / "raw/node-label.csv.gz") << "0\n1\n2\n";
  expect_error([&] { read_ogb_raw(dir_); }, ErrorCategory::InvalidInput,
               {"node-label.csv.gz", "not a gzip file"});
}

TEST_F(BadInput, WrongColumnCountInEdges) {
  files_["raw/edge.csv.gz"] = "0,1\n1,2\n2,3,4\n3,4\n4,5\n";
  expect_refused(ErrorCategory::InvalidInput, {"edge.csv.gz:3:", "expected 2 columns, found 3"});
}

TEST_F(BadInput, WrongColumnCountInFeatures) {
  files_["raw/node-feat.csv.gz"] = "1,2,3\n1,2,3\n1,2,3\n1,2,3\n1,2\n1,2,3\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"node-feat.csv.gz:5:", "expected 3 columns, found 2"});
}

TEST_F(BadInput, NonNumericField) {
  files_["raw/node-feat.csv.gz"] = "1,2,3\n1,x2,3\n1,2,3\n1,2,3\n1,2,3\n1,2,3\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"node-feat.csv.gz:2:", "column 2", "'x2' is not a number"});
}

TEST_F(BadInput, NonIntegerEdgeEndpoint) {
  files_["raw/edge.csv.gz"] = "0,1\n1,2.5\n2,3\n3,4\n4,5\n";
  expect_refused(ErrorCategory::InvalidInput, {"edge.csv.gz:2:", "'2.5' is not an integer"});
}

TEST_F(BadInput, NanFeature) {
  files_["raw/node-feat.csv.gz"] = "1,2,3\n1,2,3\n1,2,3\n1,nan,3\n1,2,3\n1,2,3\n";
  expect_refused(ErrorCategory::InvalidInput, {"node-feat.csv.gz:4:", "column 2", "not a finite"});
}

TEST_F(BadInput, InfFeature) {
  files_["raw/node-feat.csv.gz"] = "1,2,3\n1,2,1e39\n1,2,3\n1,2,3\n1,2,3\n1,2,3\n";
  expect_refused(ErrorCategory::InvalidInput, {"node-feat.csv.gz:2:", "column 3", "not a finite"});
}

TEST_F(BadInput, EdgeEndpointOutOfRange) {
  files_["raw/edge.csv.gz"] = "0,1\n1,2\n2,3\n3,6\n4,5\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"edge.csv.gz:4:", "destination node id 6 is outside [0, 6)"});
}

TEST_F(BadInput, NegativeEdgeEndpoint) {
  files_["raw/edge.csv.gz"] = "0,1\n-1,2\n2,3\n3,4\n4,5\n";
  expect_refused(ErrorCategory::InvalidInput, {"edge.csv.gz:2:", "source node id -1"});
}

TEST_F(BadInput, LabelOutOfRange) {
  files_["raw/node-label.csv.gz"] = "0\n1\n3\nnan\n1\n0\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"node-label.csv.gz:3:", "class id 3 is outside [0, 3)", "meta.json"});
}

TEST_F(BadInput, NegativeLabel) {
  files_["raw/node-label.csv.gz"] = "0\n1\n2\n-1\n1\n0\n";
  expect_refused(ErrorCategory::InvalidInput, {"node-label.csv.gz:4:", "negative class id -1"});
}

TEST_F(BadInput, NegativeLabelWrittenAsFloat) {
  files_["raw/node-label.csv.gz"] = "0\n1\n2\n-1.0\n1\n0\n";
  expect_refused(ErrorCategory::InvalidInput, {"node-label.csv.gz:4:", "negative class id -1"});
}

TEST_F(BadInput, MultiLabelValueOutOfRange) {
  files_["meta.json"] = R"({"add_inverse_edge": true, "split": "public", "num_tasks": 2,
    "task_type": "binary classification", "eval_metric": "rocauc"})";
  files_["raw/node-label.csv.gz"] = "0,1\n1,nan\n,1\n0,2\n1,1\n0,0\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"node-label.csv.gz:4:", "column 2", "'2' is out of range"});
}

TEST_F(BadInput, SplitIndexOutOfRange) {
  files_["split/public/test.csv.gz"] = "4\n5\n6\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"split/public/test.csv.gz:3:", "node id 6 is outside [0, 6)"});
}

TEST_F(BadInput, SplitIndexDuplicated) {
  files_["split/public/train.csv.gz"] = "0\n1\n3\n1\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"split/public/train.csv.gz:4:", "node id 1 is listed twice", "line 2"});
}

TEST_F(BadInput, FeatureRowsDisagreeWithNodeCount) {
  files_["raw/node-feat.csv.gz"] = "1,2,3\n1,2,3\n1,2,3\n1,2,3\n1,2,3\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"node-feat.csv.gz:5:", "ends after 5 feature rows", "num-node-list.csv.gz",
                  "6 nodes"});
}

TEST_F(BadInput, LabelLinesDisagreeWithNodeCount) {
  files_["raw/node-label.csv.gz"] = "0\n1\n2\nnan\n1\n0\n2\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"node-label.csv.gz:7:", "more label lines than the 6 nodes",
                  "num-node-list.csv.gz"});
}

TEST_F(BadInput, EdgeLinesDisagreeWithEdgeCount) {
  files_["raw/num-edge-list.csv.gz"] = "4\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"edge.csv.gz:5:", "more edge lines than the 4", "num-edge-list.csv.gz"});
}

TEST_F(BadInput, FewerEdgeLinesThanEdgeCount) {
  files_["raw/num-edge-list.csv.gz"] = "7\n";
  expect_refused(ErrorCategory::InvalidInput,
                 {"edge.csv.gz:5:", "ends after 5 edge lines", "num-edge-list.csv.gz", "says 7"});
}

TEST_F(BadInput, CountFileWithTwoGraphs) {
  files_["raw/num-node-list.csv.gz"] = "6\n6\n";
  expect_refused(ErrorCategory::InvalidInput, {"num-node-list.csv.gz:2:", "exactly one graph"});
}

TEST_F(BadInput, MetaJsonSyntax) {
  files_["meta.json"] = "{\"add_inverse_edge\": true,\n \"split\": public}";
  expect_refused(ErrorCategory::InvalidInput, {"meta.json", "not valid JSON", "line 2"});
}

TEST_F(BadInput, MetaJsonMissingKey) {
  files_["meta.json"] = R"({"split": "public", "num_classes": 3,
    "task_type": "multiclass classification", "eval_metric": "acc"})";
  expect_refused(ErrorCategory::InvalidInput, {"meta.json", "missing key 'add_inverse_edge'"});
}

TEST_F(BadInput, MetaJsonWrongType) {
  files_["meta.json"] = R"({"add_inverse_edge": true, "split": "public", "num_classes": "three",
    "task_type": "multiclass classification", "eval_metric": "acc"})";
  expect_refused(ErrorCategory::InvalidInput, {"meta.json", "'num_classes' must be an integer"});
}

// A count no dataset has is refused naming the file and key before anything is sized by it
// (it used to reach the allocator as a (hidden, C) weight).
TEST_F(BadInput, MetaJsonAbsurdCount) {
  files_["meta.json"] = R"({"add_inverse_edge": true, "split": "public",
    "num_classes": 1000000000000, "task_type": "multiclass classification", "eval_metric": "acc"})";
  expect_refused(
      ErrorCategory::InvalidInput,
      {"meta.json", "'num_classes' must be an integer in [1, 1048576]", "1000000000000"});
  files_["meta.json"] = R"({"add_inverse_edge": true, "split": "public", "num_tasks": 99999999,
    "task_type": "binary classification", "eval_metric": "rocauc"})";
  expect_refused(ErrorCategory::InvalidInput, {"meta.json", "'num_tasks'", "99999999"});
  files_["meta.json"] = R"({"add_inverse_edge": true, "split": "public", "num_classes": 3,
    "num_features": 100000000000, "task_type": "multiclass classification", "eval_metric": "acc"})";
  expect_refused(ErrorCategory::InvalidInput, {"meta.json", "'num_features'", "100000000000"});
}

TEST_F(BadInput, MetaJsonUnknownTaskType) {
  files_["meta.json"] = R"({"add_inverse_edge": true, "split": "public", "num_classes": 3,
    "task_type": "regression", "eval_metric": "mae"})";
  expect_refused(ErrorCategory::InvalidInput, {"meta.json", "task_type 'regression'"});
}

TEST_F(BadInput, MetaJsonMissingWithUnknownFolderName) {
  files_.erase("meta.json");
  expect_refused(ErrorCategory::Io, {"meta.json", "not found", "ogbn_arxiv"});
}

TEST_F(BadInput, SplitNamedByMetaMissing) {
  files_["meta.json"] = R"({"add_inverse_edge": true, "split": "time", "num_classes": 3,
    "task_type": "multiclass classification", "eval_metric": "acc"})";
  expect_refused(ErrorCategory::Io, {"split/time", "names split 'time'", "present: public"});
}

TEST_F(BadInput, SeveralSplitsAndNoneNamed) {
  files_["meta.json"] = R"({"add_inverse_edge": true, "num_classes": 3,
    "task_type": "multiclass classification", "eval_metric": "acc"})";
  files_["split/other/train.csv.gz"] = "0\n";
  files_["split/other/valid.csv.gz"] = "1\n";
  files_["split/other/test.csv.gz"] = "2\n";
  expect_refused(ErrorCategory::InvalidInput, {"split", "several splits (other, public)"});
}

// OGB's binary variant is read when raw/data.npz stands without edge.csv.gz (test_ogb_npz); a
// data.npz that is not an archive is refused by name.
TEST_F(BadInput, BinaryVariantThatIsNoArchiveIsRefused) {
  files_.erase("raw/edge.csv.gz");
  write_all();
  std::ofstream(dir_ / "raw/data.npz") << "PK";
  expect_error([&] { read_ogb_raw(dir_); }, ErrorCategory::InvalidInput,
               {"data.npz", "not a readable .npz archive"});
}

// A folder named ogbn_papers100M without meta.json takes the built-in row: its split is "time".
TEST_F(BadInput, PapersFolderTakesTheBuiltInFlags) {
  dir_ = root_ / "ogbn_papers100M";
  files_.erase("meta.json");
  expect_refused(ErrorCategory::Io, {"split/time", "built-in OGB master table row for "
                                     "ogbn_papers100M", "present: public"});
}

TEST_F(BadInput, FieldsWithSpacesAndPlusAreAccepted) {
  files_["raw/edge.csv.gz"] = "0, 1\n+1,2\n2 ,3\n\n3,4\r\n4,5";  // blank line skipped, CRLF, no final \n
  files_["raw/node-label.csv.gz"] = "0\n1.0\n2\nNaN\n1\n0\n";
  write_all();
  Dataset d = read_ogb_raw(dir_);
  EXPECT_EQ(d.graph.nnz(), 10);
  EXPECT_EQ(d.labels[1], 1);
  EXPECT_EQ(d.labels[3], -1);
}

}  // namespace
}  // namespace tessera
