// SPDX-License-Identifier: Apache-2.0
// Summary JSON keys, progress lines and the metrics writer's temp-file-then-rename contract.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/run_report.h"
#include "engine/system.h"
#include "tests/apps/cli_test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const char* name) {
  const fs::path dir = cli_test::work_dir("tessera_report") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(RunReport, SummaryHasStableKeys) {
  TrainConfig config;
  DatasetInfo dataset;
  dataset.name = "tiny";
  GraphTotals totals;
  PartitionStats partition;
  partition.edge_cut = 12;
  partition.halo_nodes_total = 5;
  RunResult a;
  a.best_valid = 0.5;
  a.test_at_best_valid = 0.4;
  a.final_test = 0.3;
  a.epoch_seconds = {0.1, 0.3, 0.2};
  RunResult b = a;
  b.run = 1;
  b.test_at_best_valid = 0.6;
  RunInfo info;
  info.config = &config;
  info.dataset = &dataset;
  info.totals = &totals;
  info.ranks = 2;
  info.partition_method = "metis";
  info.partition = &partition;
  info.parallel.mode = "hybrid";
  info.parallel.parts = 2;
  info.parallel.stages = 2;
  info.parallel.chunks = 3;
  info.parallel.stage_first_layer = {0, 2};
  info.peak_rss_bytes_per_rank = {10, 20};
  auto s = nlohmann::json::parse(summary_json(info, {a, b}));
  for (const char* key : {"dataset", "nodes", "edges", "model", "num_layers", "hidden_channels",
                          "epochs", "best_valid_acc", "test_acc_at_best_valid", "final_test_acc",
                          "epoch_s_median", "peak_rss_bytes", "ranks", "partition",
                          "comm_bytes_per_epoch", "comm_s", "comm_hidden_s",
                          "peak_rss_bytes_max", "peak_rss_bytes_sum"})
    EXPECT_TRUE(s.contains(key)) << key;
  EXPECT_EQ(s["ranks"].get<int>(), 2);
  EXPECT_EQ(s["parallel"].get<std::string>(), "hybrid");
  EXPECT_EQ(s["graph_parts"].get<int>(), 2);
  EXPECT_EQ(s["stages"].get<int>(), 2);
  EXPECT_EQ(s["chunks"].get<int>(), 3);
  EXPECT_EQ(s["stage_first_layer"].get<std::vector<int>>(), (std::vector<int>{0, 2}));
  EXPECT_EQ(s["peak_rss_bytes_per_rank"].get<std::vector<std::uint64_t>>(),
            (std::vector<std::uint64_t>{10, 20}));
  EXPECT_EQ(s["partition"]["method"].get<std::string>(), "metis");
  EXPECT_EQ(s["partition"]["edge_cut"].get<std::int64_t>(), 12);
  EXPECT_EQ(s["partition"]["halo_nodes"].get<std::int64_t>(), 5);
  for (const char* key : {"halo_forward", "halo_backward", "all_reduce"})
    EXPECT_TRUE(s["comm_bytes_per_epoch"].contains(key)) << key;
  EXPECT_DOUBLE_EQ(s["test_acc_at_best_valid"].get<double>(), 0.5);
  EXPECT_NEAR(s["test_acc_at_best_valid_std"].get<double>(), std::sqrt(0.02), 1e-12);
  EXPECT_DOUBLE_EQ(s["epoch_s_median"].get<double>(), 0.2);
  EXPECT_EQ(s["per_run"].size(), 2u);
  EXPECT_GT(s["peak_rss_bytes"].get<std::uint64_t>(), 0u);
}

// The lines a reader of `path` sees now (tail -f): each must be whole.
std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(RunReport, MetricsFileGrowsALineAtEveryEpoch) {
  fs::path dir = temp_dir("metrics");
  fs::path path = dir / "m.jsonl";
  {
    MetricsWriter writer(path.string(), "acc");
    EpochRecord r;
    r.epoch = 1;
    r.loss = 1.5;
    r.evaluated = true;
    r.valid_metric = 0.25;
    writer.write(r);
    ASSERT_EQ(lines_of(path).size(), 1u) << "streamed as written";
    EXPECT_EQ(nlohmann::json::parse(lines_of(path)[0])["epoch"], 1);
    r.epoch = 2;
    r.evaluated = false;
    writer.write(r);
    EXPECT_EQ(lines_of(path).size(), 2u);
    writer.commit();
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  auto first = nlohmann::json::parse(line);
  for (const char* key : {"epoch", "loss", "train_acc", "valid_acc", "test_acc", "epoch_s"})
    EXPECT_TRUE(first.contains(key)) << key;
  EXPECT_DOUBLE_EQ(first["valid_acc"].get<double>(), 0.25);
  std::getline(in, line);
  EXPECT_TRUE(nlohmann::json::parse(line)["valid_acc"].is_null());

  // A run that failed, before its first epoch or after some, leaves no file; one that finished
  // (or stopped to continue later) commits it and keeps every line.
  fs::path abandoned = dir / "abandoned.jsonl";
  { MetricsWriter writer(abandoned.string(), "acc"); }
  EXPECT_FALSE(fs::exists(abandoned));
  EpochRecord r;
  r.epoch = 1;
  fs::path failed = dir / "failed.jsonl";
  {
    MetricsWriter writer(failed.string(), "acc");
    writer.write(r);
  }
  EXPECT_FALSE(fs::exists(failed));
  fs::path committed = dir / "committed.jsonl";
  {
    MetricsWriter writer(committed.string(), "acc");
    writer.write(r);
    writer.commit();
  }
  EXPECT_EQ(lines_of(committed).size(), 1u);
}

TEST(RunReport, WriteFileAtomicReplacesWholeFile) {
  fs::path dir = temp_dir("atomic");
  write_file_atomic(dir / "a.json", "first");
  write_file_atomic(dir / "a.json", "second");
  std::ifstream in(dir / "a.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "second");
  EXPECT_THROW(write_file_atomic(dir / "missing" / "a.json", "x"), Error);
}

TEST(RunReport, StatisticsHelpers) {
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 2.0, 3.0}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0.0);
  EXPECT_DOUBLE_EQ(stddev({1.0}), 0.0);
  EXPECT_NEAR(stddev({1.0, 2.0, 3.0}), 1.0, 1e-12);
}

}  // namespace
}  // namespace tessera
