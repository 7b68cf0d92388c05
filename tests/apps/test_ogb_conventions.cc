// SPDX-License-Identifier: Apache-2.0
// train_gcn the way OGB's users run their examples: the command of OGB's ogbn-arxiv GCN example
// pasted as it is (underscore flags, --device 0 on a machine without a GPU, --log_steps) on a
// folder in the ogbn_arxiv layout runs, prints its settings and OGB's report lines, and those
// lines mean what OGB's Logger means (checked against the per-epoch metrics).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/loaders.h"
#include "datasets/synthetic.h"
#include "tests/apps/cli_test_util.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string stdout_text, stderr_text;
};

fs::path work_dir() { return tessera::cli_test::work_dir("tessera_ogb_conventions"); }

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Result run(const std::string& program, const std::string& args) {
  const fs::path out = work_dir() / "stdout.txt", err = work_dir() / "stderr.txt";
  const std::string command = program + " " + args + " > " + out.string() + " 2> " + err.string();
  const int status = std::system(command.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.stdout_text = read_file(out);
  r.stderr_text = read_file(err);
  return r;
}

// A dataset in the layout of OGB's ogbn_arxiv download (no meta.json: the folder name gives the
// flags; split/time), made from the default synthetic graph cut to 800 nodes: the pasted command
// trains 10 runs of 500 epochs at 256 hidden, and its report, not the graph, is what is tested.
fs::path ogbn_arxiv_folder() {
  static const fs::path dir = [] {
    const fs::path d = work_dir() / "dataset" / "ogbn_arxiv";
    fs::remove_all(d);
    tessera::SyntheticConfig config = tessera::synthetic_preset("default");
    config.num_nodes = 800;
    config.num_edges = 4000;
    tessera::write_ogb_raw(tessera::generate_synthetic(config), d);
    fs::remove(d / "meta.json");
    fs::rename(d / "split" / "public", d / "split" / "time");
    return d;
  }();
  return dir;
}

std::string percent(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", 100.0 * value);
  return buf;
}

TEST(OgbConventions, ThePastedArxivCommandRunsAndReportsAsOgbLoggerDoes) {
  const fs::path metrics = work_dir() / "arxiv.jsonl", summary = work_dir() / "arxiv.json";
  // ogb/examples/nodeproppred/arxiv/gnn.py's flags, as its README runs it.
  const std::string pasted =
      "--device 0 --log_steps 1 --num_layers 3 --hidden_channels 256 "
      "--dropout 0.5 --lr 0.01 --epochs 500 --runs 10";
  const Result r =
      run(TRAIN_GCN_PATH, pasted + " --dataset " + ogbn_arxiv_folder().string() + " --metrics " +
                              metrics.string() + " --summary " + summary.string());
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  // The settings first, one line, as print(args).
  EXPECT_EQ(r.stdout_text.rfind("Settings(", 0), 0u) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("num_layers=3, hidden_channels=256"), std::string::npos);
  EXPECT_NE(r.stderr_text.find("--device 0: no GPU here, training on the CPU"), std::string::npos)
      << r.stderr_text;

  // Highest Train / Highest Valid over the epochs; Final Train / Final Test at the epoch of the
  // highest valid (the first such epoch), from every epoch's metrics.
  std::vector<double> highest_train(10, 0.0), highest_valid(10, -1.0), final_train(10),
      final_test(10);
  std::ifstream lines(metrics);
  std::string line;
  int epochs = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    const int run = j["run"];
    ++epochs;
    highest_train[run] = std::max(highest_train[run], j["train_acc"].get<double>());
    if (j["valid_acc"].get<double>() > highest_valid[run]) {
      highest_valid[run] = j["valid_acc"];
      final_train[run] = j["train_acc"];
      final_test[run] = j["test_acc"];
    }
  }
  EXPECT_EQ(epochs, 5000);
  const auto s = nlohmann::json::parse(read_file(summary));
  for (int run = 0; run < 10; ++run) {
    const auto& one = s["per_run"][run];
    EXPECT_EQ(one["highest_train"], highest_train[run]) << run;
    EXPECT_EQ(one["highest_valid"], highest_valid[run]) << run;
    EXPECT_EQ(one["final_train"], final_train[run]) << run;
    EXPECT_EQ(one["final_test"], final_test[run]) << run;
    char block[256];
    std::snprintf(block, sizeof block,
                  "Run %02d:\nHighest Train: %s\nHighest Valid: %s\n  Final Train: %s\n"
                  "   Final Test: %s\n",
                  run + 1, percent(highest_train[run]).c_str(), percent(highest_valid[run]).c_str(),
                  percent(final_train[run]).c_str(), percent(final_test[run]).c_str());
    EXPECT_NE(r.stdout_text.find(block), std::string::npos) << block << r.stdout_text;
  }
  const std::string all =
      "All runs:\nHighest Train: " + percent(s["highest_train"]) + " ± " +
      percent(s["highest_train_std"]) + "\nHighest Valid: " + percent(s["highest_valid"]) + " ± " +
      percent(s["highest_valid_std"]) + "\n  Final Train: " + percent(s["final_train"]) + " ± " +
      percent(s["final_train_std"]) + "\n   Final Test: " + percent(s["final_test"]) + " ± " +
      percent(s["final_test_std"]) + "\n";
  EXPECT_NE(r.stdout_text.find(all), std::string::npos) << all << r.stdout_text;
  // The keys of 0.1 stay for one release, with their old meanings.
  EXPECT_EQ(s["test_acc_at_best_valid"], s["final_test"]);
  EXPECT_EQ(s["best_valid_acc"], s["highest_valid"]);
  EXPECT_EQ(s["final_test_acc"], s["last_test"]);
}

TEST(OgbConventions, LogStepsPrintsEveryNthEpochAndUseSageIsTheSageModel) {
  const fs::path summary = work_dir() / "log_steps.json";
  const Result r = run(TRAIN_GCN_PATH,
                       "--use_sage --log_steps 5 --epochs 12 --hidden_channels 8 "
                       "--summary " +
                           summary.string());
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  int lines = 0;
  for (std::size_t at = 0; (at = r.stderr_text.find("| Epoch ", at)) != std::string::npos; ++at)
    ++lines;
  EXPECT_EQ(lines, 2) << r.stderr_text;  // epochs 5 and 10
  EXPECT_NE(r.stderr_text.find("Epoch 0005"), std::string::npos);
  EXPECT_NE(r.stderr_text.find("Epoch 0010"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(read_file(summary))["model"], "sage");
}

TEST(OgbConventions, EveryProgramPrintsItsVersion) {
  for (const char* program : {TRAIN_GCN_PATH, TESSERA_DATA_PATH, PARTITION_GRAPH_PATH}) {
    const Result r = run(program, "--version");
    EXPECT_EQ(r.exit_code, 0) << program;
    EXPECT_NE(r.stdout_text.find("Tessera 0."), std::string::npos) << r.stdout_text;
    EXPECT_NE(r.stdout_text.find("(commit "), std::string::npos) << r.stdout_text;
  }
}

}  // namespace
