// SPDX-License-Identifier: Apache-2.0
// Plan files: a plan written and read back is the same plan with its metadata; a plan is checked
// against the dataset and the job; an existing path is refused and nothing is left behind; a
// file that is not a plan, of another version, or with an owner outside [0, K) is an error
// naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"
#include "datasets/hdf5_io.h"
#include "partition/plan_file.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class PlanFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_plan_file_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    file_.plan = partition_random(1000, 3, 5);
    file_.method = "ptscotch";
    file_.dataset = "toy";
    file_.dataset_fingerprint = 0x1234abcd5678ef90ULL;
    file_.edge_cut = 4242;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Expects `f` to throw an Error whose text holds `path` and `piece`.
  static void expect_error_naming(const std::function<void()>& f, const fs::path& path,
                                  const std::string& piece) {
    try {
      f();
      ADD_FAILURE() << "no error for " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
    }
  }

  // A plan-like file whose owner array and version are given.
  fs::path forged(const std::vector<std::int32_t>& owner, std::int64_t version) {
    const fs::path path = dir_ / "forged.h5";
    fs::remove(path);
    hdf5::Writer out(path, path.string());
    out.attribute("format", std::string("tessera-plan"));
    out.attribute("format_version", version);
    out.attribute("method", std::string("x"));
    out.attribute("dataset_name", std::string("toy"));
    out.attribute("dataset_fingerprint", std::uint64_t{1});
    out.attribute("num_parts", std::int64_t{2});
    out.attribute("num_nodes", static_cast<std::int64_t>(owner.size()));
    out.attribute("edge_cut", std::int64_t{-1});
    out.array("/owner", hdf5::kInt32, owner.data(), static_cast<std::int64_t>(owner.size()), 1, 1,
              false);
    out.close();
    return path;
  }

  fs::path dir_;
  PlanFile file_;
};

TEST_F(PlanFileTest, RoundTrips) {
  const fs::path path = dir_ / "plan.h5";
  write_plan_file(path, file_);
  const PlanFile back = read_plan_file(path);
  EXPECT_EQ(back.plan.num_parts, 3);
  EXPECT_EQ(back.plan.owner, file_.plan.owner);
  EXPECT_EQ(back.method, "ptscotch");
  EXPECT_EQ(back.dataset, "toy");
  EXPECT_EQ(back.dataset_fingerprint, file_.dataset_fingerprint);
  EXPECT_EQ(back.edge_cut, 4242);
  EXPECT_NO_THROW(check_plan_matches(back, "plan", 1000, file_.dataset_fingerprint, 3));
  expect_error_naming([&] { check_plan_matches(back, path.string(), 999, 1, 3); }, path,
                      "a plan of another dataset");
  expect_error_naming(
      [&] { check_plan_matches(back, path.string(), 1000, file_.dataset_fingerprint, 4); }, path,
      "a plan of 3 parts, but this job has 4 ranks");
}

TEST_F(PlanFileTest, RefusesAnExistingPathAndLeavesNothingBehind) {
  const fs::path path = dir_ / "plan.h5";
  { std::ofstream(path) << "taken"; }
  expect_error_naming([&] { write_plan_file(path, file_); }, path, "exists");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1) << "a temporary file was left behind";
}

TEST_F(PlanFileTest, BadFilesAreNamed) {
  expect_error_naming([&] { read_plan_file(dir_ / "none.h5"); }, dir_ / "none.h5",
                      "no such plan file");
  const fs::path junk = dir_ / "junk.h5";
  { std::ofstream(junk) << "not hdf5 at all"; }
  expect_error_naming([&] { read_plan_file(junk); }, junk, "");
  const fs::path other = dir_ / "other.h5";
  {
    hdf5::Writer out(other, other.string());
    out.attribute("format", std::string("tessera-part"));
    out.close();
  }
  expect_error_naming([&] { read_plan_file(other); }, other, "not a Tessera plan file");
  fs::path f = forged({0, 1, 2, 1}, 1);
  expect_error_naming([&] { read_plan_file(f); }, f, "node 2 has part 2, outside [0, 2)");
  f = forged({0, 1, -1, 1}, 1);
  expect_error_naming([&] { read_plan_file(f); }, f, "node 2 has part -1");
  f = forged({0, 1, 0, 1}, 2);
  expect_error_naming([&] { read_plan_file(f); }, f, "plan format version 2");
  f = forged({0, 1, 0, 1}, 1);
  EXPECT_EQ(read_plan_file(f).plan.owner, (std::vector<std::int32_t>{0, 1, 0, 1}));
}

}  // namespace
}  // namespace tessera
