// SPDX-License-Identifier: Apache-2.0
// `mpiexec -n K train_gcn --parallel pipeline|hybrid` from the outside: every kind of bad
// pipeline input (stages against layers and ranks, chunks, memory budget, options a pipeline
// cannot honour) ends every rank with the usage status 2 (a stage, or a graph-mode part, over
// the memory budget: 1)
// before the first epoch, with one message
// naming the flag and no summary or metrics file; good pipeline and hybrid runs write the
// layout and per-epoch bytes equal to the traffic model into their summary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/device.h"
#include "tests/apps/cli_test_util.h"

namespace {

namespace cli_test = tessera::cli_test;
namespace fs = std::filesystem;

using cli_test::read_text;
using cli_test::Result;

fs::path work_dir() { return cli_test::work_dir("tessera_pipeline_cli"); }

// A small, quick model on synth:default (3000 nodes, 64 features, 6 classes).
const std::string kSmall = " --model resgcn --num-layers 4 --hidden-channels 32 --epochs 3";

// train_gcn on `ranks` ranks, each rank's exit status written to exit.<rank> in `status_dir`
// (the wrapper itself ends 0, so that mpiexec never tears the other ranks down early and every
// rank's own status is seen).
Result run_ranks(int ranks, const std::string& args, const fs::path& status_dir) {
  fs::remove_all(status_dir);
  fs::create_directories(status_dir);
  const std::string wrapper = "sh -c '\"$0\" \"$@\"; echo $? > " + status_dir.string() +
                              "/exit.$PMI_RANK' ";
  return cli_test::run(std::string(MPIEXEC_PATH) + " -n " + std::to_string(ranks) + " " +
                           wrapper + TRAIN_GCN_PATH + " " + args,
                       work_dir() / "out.log");
}

// The exit status of every rank (-1: none recorded).
std::vector<int> rank_status(int ranks, const fs::path& status_dir) {
  std::vector<int> status;
  for (int r = 0; r < ranks; ++r) {
    std::ifstream in(status_dir / ("exit." + std::to_string(r)));
    int s = -1;
    in >> s;
    status.push_back(in ? s : -1);
  }
  return status;
}

// One line of the output holds every piece; returns it.
std::string line_with(const Result& r, const std::vector<std::string>& pieces) {
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (std::all_of(pieces.begin(), pieces.end(),
                    [&](const std::string& piece) { return line.find(piece) != line.npos; }))
      return line;
  }
  std::string wanted;
  for (const std::string& piece : pieces) wanted += " '" + piece + "'";
  ADD_FAILURE() << "no line holds all of" << wanted << " in:\n" << r.output;
  return "";
}

// Runs train_gcn (progress lines on, a summary and a metrics file asked for) and expects every
// rank to exit with `status` (2, the usage status: flags refused against each other or the
// ranks; 1: the run does not fit) within 30 s with one message holding every piece, no epoch
// trained, and neither file left behind. Returns the message line.
std::string expect_refused(int ranks, const std::string& args,
                           const std::vector<std::string>& pieces, int status = 2) {
  SCOPED_TRACE(std::to_string(ranks) + " ranks: " + args);
  const fs::path summary = work_dir() / "refused.json", metrics = work_dir() / "refused.jsonl";
  fs::remove(summary);
  fs::remove(metrics);
  const Result r = run_ranks(ranks, args + " --summary " + summary.string() + " --metrics " +
                                        metrics.string(),
                             work_dir() / "status");
  EXPECT_EQ(r.exit_code, 0) << "the wrapper ends 0; mpiexec or a rank hung or crashed:\n"
                            << r.output;
  EXPECT_EQ(rank_status(ranks, work_dir() / "status"), std::vector<int>(ranks, status)) << r.output;
  EXPECT_LT(r.seconds, 30.0) << r.output;
  EXPECT_EQ(r.output.find("Epoch "), std::string::npos) << "training started:\n" << r.output;
  EXPECT_FALSE(fs::exists(summary)) << "a refused run left its summary behind";
  EXPECT_FALSE(fs::exists(metrics)) << "a refused run left its metrics behind";
  return line_with(r, pieces);
}

TEST(PipelineCli, MoreStagesThanLayersIsRefused) {
  // Pipeline: one stage per rank, 4 ranks for 3 layers; hybrid: --stages 2 for 1 layer.
  expect_refused(4, "--parallel pipeline --num-layers 3 --epochs 3",
                 {"train_gcn: error:", "--stages 4 > --num-layers 3"});
  expect_refused(2, "--parallel hybrid --stages 2 --num-layers 1 --epochs 3",
                 {"train_gcn: error:", "--stages 2 > --num-layers 1"});
}

TEST(PipelineCli, StagesThatDoNotFitTheRanksAreRefused) {
  // Hybrid: more stages than ranks; ranks not a multiple of the stages.
  expect_refused(2, "--parallel hybrid --stages 4 --num-layers 8 --epochs 3",
                 {"train_gcn: error:", "--stages 4 with 2 ranks", "more stages than ranks"});
  expect_refused(4, "--parallel hybrid --stages 3 --num-layers 8 --epochs 3",
                 {"train_gcn: error:", "4 ranks are not a multiple of --stages 3"});
  // Pipeline: --stages must equal the ranks.
  expect_refused(2, "--parallel pipeline --stages 3 --num-layers 8 --epochs 3",
                 {"train_gcn: error:", "--stages 3 does not match the 2 ranks",
                  "--parallel hybrid"});
  // Hybrid needs --stages.
  expect_refused(2, "--parallel hybrid" + kSmall, {"train_gcn: error:", "needs --stages"});
}

TEST(PipelineCli, GpuOptionsAreCheckedOnEveryRank) {
  // Without a usable GPU (or in a build without CUDA) every rank ends with the reason, in every
  // mode: the pipelined modes train on GPUs too, so nothing else refuses them first.
  if (tessera::gpu_count() > 0)
    GTEST_SKIP()
        << "this machine has a usable GPU: every mode trains there (test_cuda_distributed)";
  for (const std::string mode : {"graph", "pipeline", "hybrid --stages 2"}) {
    SCOPED_TRACE(mode);
    expect_refused(2, "--parallel " + mode + " --device cuda" + kSmall,
                   {"train_gcn: error:", "device 'cuda' requested", "use --device cpu"});
  }
}

TEST(PipelineCli, FewerChunksThanStagesAreRefused) {
  expect_refused(2, "--parallel pipeline --chunks 1" + kSmall,
                 {"train_gcn: error:", "--chunks 1 < --stages 2"});
  expect_refused(2, "--parallel hybrid --stages 2 --chunks 1" + kSmall,
                 {"train_gcn: error:", "--chunks 1 < --stages 2"});
}

TEST(PipelineCli, MemoryBudgetBelowTheEstimateIsRefused) {
  // Wide enough that the estimate shows in the message's two decimals (~0.1 GiB a stage).
  const std::string model = " --model resgcn --num-layers 4 --hidden-channels 512 --epochs 1";
  const std::string line =
      expect_refused(2, "--parallel pipeline --memory-budget 0.0001" + model,
                     {"train_gcn: error:", "needs an estimated", "GiB", "--memory-budget"}, 1);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex("estimated ([0-9.]+) GiB"))) << line;
  const double estimate = std::stod(m[1].str());
  EXPECT_GT(estimate, 0.0001) << line;
  std::printf("[ measured ] estimated stage memory: %.2f GiB (%s)\n", estimate, line.c_str());
  // A budget well above the estimate trains.
  const Result ok = run_ranks(
      2, "--parallel pipeline --quiet --memory-budget " + std::to_string(4.0 * estimate + 0.1) +
             model,
      work_dir() / "status_ok");
  EXPECT_EQ(rank_status(2, work_dir() / "status_ok"), std::vector<int>(2, 0)) << ok.output;
}

// Graph mode refuses a part estimated above the budget in the same way, on one rank and on two.
// A budget above the estimate but below eight times the part's floor measures the step (the
// "Memory:" line) and trains to the same predictions as the default budget, which measures
// nothing at this size: the probe leaves the run as it was.
TEST(PipelineCli, GraphModeMemoryBudgetBelowTheEstimateIsRefused) {
  const std::string model = " --num-layers 3 --hidden-channels 256 --epochs 2";
  double estimate = 0.0;
  for (const int ranks : {1, 2}) {
    const std::string line = expect_refused(
        ranks, "--parallel graph --memory-budget 0.0001" + model,
        {"train_gcn: error:", "--parallel graph: part", "needs an estimated", "--memory-budget"},
        1);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, std::regex("estimated ([0-9.e-]+) GiB"))) << line;
    estimate = std::stod(m[1].str());
    EXPECT_GT(estimate, 0.0001) << line;
    std::printf("[ measured ] %d rank(s): %s\n", ranks, line.c_str());
  }
  std::vector<std::string> predictions;
  for (const std::string& budget : {std::to_string(2.0 * estimate), std::string()}) {
    const fs::path out = work_dir() / ("predictions" + std::to_string(predictions.size()) + ".csv");
    fs::remove(out);
    const Result r = run_ranks(2,
                               "--parallel graph" + model + " --save-predictions " + out.string() +
                                   (budget.empty() ? std::string() : " --memory-budget " + budget),
                               work_dir() / "status_fit");
    EXPECT_EQ(rank_status(2, work_dir() / "status_fit"), std::vector<int>(2, 0)) << r.output;
    EXPECT_EQ(r.output.find("Memory: part 0 needs an estimated") != std::string::npos,
              !budget.empty())
        << r.output;
    predictions.push_back(read_text(out));
  }
  EXPECT_FALSE(predictions[0].empty());
  EXPECT_EQ(predictions[0], predictions[1]);
}

TEST(PipelineCli, OptionsAPipelineCannotHonourAreRefused) {
  expect_refused(2, "--parallel pipeline --batch-norm" + kSmall,
                 {"train_gcn: error:", "--parallel pipeline", "--batch-norm"});
  expect_refused(2, "--parallel pipeline --codec adaptive" + kSmall,
                 {"train_gcn: error:", "--parallel pipeline", "--codec adaptive"});
  expect_refused(2, "--parallel hybrid --stages 1 --error-feedback --codec int8" + kSmall,
                 {"train_gcn: error:", "--parallel hybrid", "--error-feedback"});
  // --stages and --chunks mean nothing in graph mode.
  expect_refused(2, "--parallel graph --stages 2" + kSmall,
                 {"train_gcn: error:", "--stages and --chunks apply to --parallel pipeline or hybrid"});
  expect_refused(
      2, "--chunks 2" + kSmall,
      {"train_gcn: error:", "--stages and --chunks apply to --parallel pipeline or hybrid"});
}

// Good runs: the summary names the layout, and the bytes per epoch are the traffic model's:
// pipeline 2 (S - 1) N H 4; hybrid adds the halo rows of each layer over the G parts,
// M · 4 · (32 + 32 + 32 + 6) in each direction (widths of 64 -> 32 -> 32 -> 32 -> 6: the first
// and last layers transform first), M the halo nodes of the partition.
nlohmann::json good_run(int ranks, const std::string& args, const std::string& name) {
  const fs::path summary = work_dir() / (name + ".json"), metrics = work_dir() / (name + ".jsonl");
  const Result r = run_ranks(ranks,
                             args + kSmall + " --quiet --summary " + summary.string() +
                                 " --metrics " + metrics.string(),
                             work_dir() / ("status_" + name));
  EXPECT_EQ(rank_status(ranks, work_dir() / ("status_" + name)), std::vector<int>(ranks, 0))
      << r.output;
  if (!fs::exists(summary)) {
    ADD_FAILURE() << "no summary:\n" << r.output;
    return {};
  }
  std::ifstream in(metrics);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const nlohmann::json epoch = nlohmann::json::parse(line);
    EXPECT_EQ(epoch["parallel"], nlohmann::json::parse(read_text(summary))["parallel"]);
  }
  EXPECT_EQ(lines, 3);
  return nlohmann::json::parse(read_text(summary));
}

TEST(PipelineCli, PipelineRunWritesItsLayoutAndStreamBytes) {
  const nlohmann::json j = good_run(2, "--parallel pipeline", "pipeline");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["parallel"], "pipeline");
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["stages"], 2);
  EXPECT_EQ(j["chunks"], 2);  // default: the stages
  const std::int64_t n = j["nodes"];
  const auto& bytes = j["comm_bytes_per_epoch"];
  EXPECT_EQ(bytes["pipeline"].get<std::int64_t>(), 2 * 1 * n * 32 * 4);
  EXPECT_EQ(bytes["halo_forward"], 0);
  EXPECT_EQ(bytes["halo_backward"], 0);
}

TEST(PipelineCli, HybridRunWritesItsLayoutAndBytes) {
  const nlohmann::json j = good_run(4, "--parallel hybrid --stages 2 --chunks 3", "hybrid");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["parallel"], "hybrid");
  EXPECT_EQ(j["ranks"], 4);
  EXPECT_EQ(j["graph_parts"], 2);
  EXPECT_EQ(j["stages"], 2);
  EXPECT_EQ(j["chunks"], 3);
  EXPECT_EQ(j["stage_first_layer"].size(), 2u);
  const std::int64_t n = j["nodes"], halo = j["partition"]["halo_nodes"];
  EXPECT_GT(halo, 0);
  const auto& bytes = j["comm_bytes_per_epoch"];
  EXPECT_EQ(bytes["pipeline"].get<std::int64_t>(), 2 * 1 * n * 32 * 4);
  EXPECT_EQ(bytes["halo_forward"].get<std::int64_t>(), halo * 4 * (32 + 32 + 32 + 6));
  EXPECT_EQ(bytes["halo_backward"].get<std::int64_t>(), halo * 4 * (32 + 32 + 32 + 6));
  std::printf("[ measured ] hybrid 2 x 2 on synth:default: %lld halo nodes, bytes/epoch pipeline "
              "%lld, halo %lld + %lld, final test %.4f\n",
              static_cast<long long>(halo), bytes["pipeline"].get<long long>(),
              bytes["halo_forward"].get<long long>(), bytes["halo_backward"].get<long long>(),
              j["final_test_acc"].get<double>());
}

}  // namespace
