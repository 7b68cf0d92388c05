// SPDX-License-Identifier: Apache-2.0
// Tests of load_dataset's dispatch: synth:PRESET[:SEED] -> generator, *.h5 -> read_hdf5, a
// directory -> read_ogb_raw, anything else -> InvalidArgument naming the spec and the forms.
// Also a synthetic graph through the OGB raw writer and reader (symmetric, bit-exact).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "core/error.h"
#include "datasets/loaders.h"
#include "tests/shared_datasets.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path path = fs::temp_directory_path() /
                  ("tessera_loaders_" + std::string(info->name()) + "_" + std::to_string(getpid()));
  fs::remove_all(path);
  fs::create_directories(path);
  return path;
}

void expect_invalid_argument(const std::string& spec, const std::string& fragment) {
  try {
    load_dataset(spec);
    ADD_FAILURE() << "'" << spec << "' was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::InvalidArgument) << error.what();
    EXPECT_NE(error.message().find(fragment), std::string::npos) << error.message();
  }
}

TEST(LoadDataset, SyntheticPresetAndSeed) {
  Dataset a = load_dataset("synth:default");
  Dataset b = load_dataset("synth:default:7");
  Dataset c = load_dataset("synth:default:7");
  EXPECT_GT(a.num_nodes(), 0);
  EXPECT_EQ(fingerprint(b), fingerprint(c));
  EXPECT_NE(fingerprint(a), fingerprint(b));
}

TEST(LoadDataset, RefusesUnknownForms) {
  expect_invalid_argument("no/such/place", "synth:PRESET");
  expect_invalid_argument("no/such/place", "no/such/place");
  expect_invalid_argument("synth:", "no preset");
  expect_invalid_argument("synth:default:x1", "seed 'x1'");
  expect_invalid_argument("synth:default:", "seed ''");
  expect_invalid_argument("synth:nonsense", "nonsense");
}

TEST(LoadDataset, DirectoryAndHdf5) {
  fs::path tmp = temp_dir();
  Dataset synth = load_dataset("synth:default:3");
  write_ogb_raw(synth, tmp / "raw_copy");
  Dataset from_dir = load_dataset((tmp / "raw_copy").string());
  EXPECT_EQ(fingerprint(synth), fingerprint(from_dir));
  EXPECT_EQ(from_dir.name, "raw_copy");
  write_hdf5(synth, tmp / "copy.h5");
  Dataset from_h5 = load_dataset((tmp / "copy.h5").string());
  EXPECT_EQ(fingerprint(synth), fingerprint(from_h5));
  fs::remove_all(tmp);
}

TEST(LoadDataset, CoraDirectory) {
  fs::path cora = fs::path(TESSERA_SHARED_DATASETS) / "cora";
  TESSERA_NEED_SHARED_DATASET(cora);
  Dataset d = load_dataset(cora.string());
  EXPECT_EQ(d.num_nodes(), 2708);
}

}  // namespace
}  // namespace tessera
