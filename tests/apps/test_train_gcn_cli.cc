// SPDX-License-Identifier: Apache-2.0
// train_gcn from the outside: each class of bad flag value and bad dataset ends with a clear
// message and a non-zero exit (no crash, no output files left behind); the same seed twice, at
// different thread counts, gives byte-identical summaries once timings are removed; metrics
// lines carry their keys.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/apps/cli_test_util.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

fs::path work_dir() { return tessera::cli_test::work_dir("tessera_cli_test"); }

// Runs a shell command line, its stdout and stderr together in Result::output.
Result run_command(const std::string& line) {
  fs::path log = work_dir() / "out.log";
  const std::string command = line + " > " + log.string() + " 2>&1";
  int status = std::system(command.c_str());
  Result r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else r.exit_code = 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);  // a crash
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  r.output = text.str();
  return r;
}

// train_gcn ARGS; `env`: NAME=VALUE ... (or env's -u NAME) set for the run.
Result run(const std::string& args, const std::string& env = "") {
  return run_command((env.empty() ? "" : "env " + env + " ") + std::string(TRAIN_GCN_PATH) + " " +
                     args);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Summary without measured values (keys ending in _s, peak_rss_bytes*, the partitioner's seconds)
// and the provenance (command line, hosts), which differs between any two runs.
nlohmann::json strip_timings(nlohmann::json j) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [key, value] : j.items()) {
      bool timing = key.rfind("peak_rss_bytes", 0) == 0 || key == "seconds" ||
                    (key.size() > 2 && key.compare(key.size() - 2, 2, "_s") == 0) ||
                    key.find("_s_") != std::string::npos || key == "provenance";
      if (!timing) out[key] = strip_timings(value);
    }
    return out;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (auto& value : j) out.push_back(strip_timings(value));
    return out;
  }
  return j;
}

const char* kQuick = "--dataset synth:default --epochs 3 --hidden-channels 8 --quiet";

TEST(TrainGcnCli, HelpDocumentsEveryFlag) {
  Result r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--dataset", "--model", "--num-layers", "--hidden-channels", "--dropout", "--lr",
        "--weight-decay", "--epochs", "--seed", "--normalize-features", "--eval-every", "--runs",
        "--batch-norm", "--threads", "--metrics", "--summary", "--device"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

TEST(TrainGcnCli, RunsAndWritesMetricsAndSummary) {
  fs::path metrics = work_dir() / "ok.jsonl", summary = work_dir() / "ok.json";
  fs::remove(metrics);
  fs::remove(summary);
  Result r = run(std::string(kQuick) + " --metrics " + metrics.string() + " --summary " +
                 summary.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Test at best Valid"), std::string::npos) << r.output;
  std::ifstream in(metrics);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    for (const char* key : {"epoch", "loss", "train_acc", "valid_acc", "test_acc", "epoch_s"})
      EXPECT_TRUE(j.contains(key)) << key;
    ++lines;
  }
  EXPECT_EQ(lines, 3);
  auto s = nlohmann::json::parse(read_file(summary));
  EXPECT_EQ(s["epochs"], 3);
  EXPECT_EQ(s["model"], "gcn");
}

// --plan: the table and its JSON, the configuration first (on 4 ranks), then its alternatives;
// nothing trains.
TEST(TrainGcnCli, PlanPrintsTheConfigurationAndItsAlternatives) {
  const fs::path json = work_dir() / "plan.json";
  fs::remove(json);
  const Result r = run("--dataset synth:default --hidden-channels 8 --plan --plan-ranks 4,1,2 "
                       "--plan-json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| graph | 4 | 4 x 1 | none |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| single | 1 | 1 x 1 | none |"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Epoch"), std::string::npos) << r.output;
  const nlohmann::json plan = nlohmann::json::parse(read_file(json));
  ASSERT_GE(plan["rows"].size(), 5u);
  EXPECT_EQ(plan["rows"][0]["ranks"], 4);
  EXPECT_EQ(plan["rows"][0]["peak_bytes_per_rank"].size(), 4u);
  EXPECT_GT(plan["rows"][0]["bytes_per_epoch"].get<double>(), 0.0);
  EXPECT_EQ(plan["parts"].size(), 4u);
  EXPECT_EQ(plan["nodes"], 3000);
}

TEST(TrainGcnCli, SameSeedGivesIdenticalSummary) {
  fs::path a = work_dir() / "det_a.json", b = work_dir() / "det_b.json";
  std::string args = "--dataset synth:default --epochs 20 --hidden-channels 32 --quiet --seed 3 "
                     "--runs 2 --batch-norm --summary ";
  ASSERT_EQ(run(args + a.string()).exit_code, 0);
  ASSERT_EQ(run(args + b.string() + " --threads 1").exit_code, 0);
  auto ja = nlohmann::json::parse(read_file(a)), jb = nlohmann::json::parse(read_file(b));
  ja.erase("threads");
  jb.erase("threads");
  EXPECT_EQ(strip_timings(ja).dump(2), strip_timings(jb).dump(2));
}

// A dataset that goes bad on disk: a raw-layout folder written by tessera_data, then one file
// cut short. train_gcn must name the file and stop with exit 1, leaving no summary behind.
TEST(TrainGcnCli, TruncatedDatasetFileIsReportedByName) {
  fs::path dir = work_dir() / "truncated_dataset";
  fs::remove_all(dir);
  std::string generate = std::string(TESSERA_DATA_PATH) + " generate --preset default --out " +
                         dir.string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(generate.c_str()), 0);
  fs::path features = dir / "raw" / "node-feat.csv.gz";
  ASSERT_TRUE(fs::exists(features));
  fs::resize_file(features, fs::file_size(features) / 2);
  fs::path summary = work_dir() / "truncated.json";
  fs::remove(summary);
  Result r = run("--dataset " + dir.string() + " --epochs 1 --summary " + summary.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("node-feat.csv.gz"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("truncated"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(summary));
}

// OGB's binary layout through tessera_data: a folder NumPy writes converts in bounded memory to
// the file its in-memory load gives (one fingerprint), as does its twin in the CSV layout,
// train_gcn trains on both, a slice of the file reads by --rows, and bad input (a bad archive,
// --rows or --memory-mib) ends with the message and status, leaving no file behind.
TEST(TrainGcnCli, TesseraDataConvertsTheBinaryLayoutAndReadsSlices) {
  const fs::path root = work_dir() / "npz";
  fs::remove_all(root);
  for (const char* variant : {"good", "source_out_of_range"}) {
    const std::string make = std::string(TESSERA_TEST_PYTHON) + " " + TESSERA_SOURCE_DIR +
                             "/tests/datasets/make_ogb_npz.py " + (root / variant).string() + " " +
                             variant;
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
  }
  const std::string data = std::string(TESSERA_DATA_PATH);
  const fs::path folder = root / "good" / "ogbn_papers100M", file = root / "papers.h5";
  const Result convert = run_command(data + " convert --dataset " + folder.string() + " --out " +
                                     file.string() + " --memory-mib 16");
  ASSERT_EQ(convert.exit_code, 0) << convert.output;
  EXPECT_NE(convert.output.find("(streamed, "), std::string::npos) << convert.output;
  auto fingerprint_of = [&](const std::string& dataset) {
    const Result info = run_command(data + " info --dataset " + dataset);
    EXPECT_EQ(info.exit_code, 0) << info.output;
    const auto at = info.output.find("fingerprint  ");
    return at == std::string::npos ? info.output : info.output.substr(at, 29);
  };
  EXPECT_EQ(fingerprint_of(file.string()), fingerprint_of(folder.string()));
  // Its twin in the CSV layout streams too, into the same arrays.
  const fs::path csv_file = root / "csv.h5";
  const Result csv = run_command(data + " convert --dataset " + (root / "good" / "csv").string() +
                                 " --out " + csv_file.string() + " --memory-mib 16");
  ASSERT_EQ(csv.exit_code, 0) << csv.output;
  EXPECT_NE(csv.output.find("(streamed, "), std::string::npos) << csv.output;
  EXPECT_EQ(fingerprint_of(csv_file.string()), fingerprint_of(folder.string()));
  for (const fs::path& dataset : {folder, file}) {
    const Result trained = run("--dataset " + dataset.string() + " --epochs 2 --quiet");
    EXPECT_EQ(trained.exit_code, 0) << trained.output;
  }
  const Result slice = run_command(data + " info --dataset " + file.string() + " --rows 100:200");
  EXPECT_EQ(slice.exit_code, 0) << slice.output;
  EXPECT_NE(slice.output.find("rows         100..200 of 300 nodes"), std::string::npos)
      << slice.output;

  const fs::path bad_out = root / "bad.h5";
  const Result bad = run_command(data + " convert --dataset " +
                                 (root / "source_out_of_range" / "ogbn_papers100M").string() +
                                 " --out " + bad_out.string());
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("edge_index.npy: edge 17 has source 300"), std::string::npos)
      << bad.output;
  for (const char* leftover : {"bad.h5", "bad.h5.tmp", "bad.h5.buckets"}) {
    EXPECT_FALSE(fs::exists(root / leftover)) << leftover << " left behind";
  }
  const Result rows = run_command(data + " info --dataset " + file.string() + " --rows 5");
  EXPECT_NE(rows.exit_code, 0);
  EXPECT_NE(rows.output.find("--rows '5': expected BEGIN:END"), std::string::npos) << rows.output;
  const Result outside =
      run_command(data + " info --dataset " + file.string() + " --rows 100:301");
  EXPECT_NE(outside.exit_code, 0);
  EXPECT_NE(outside.output.find("rows 100..301 are not a range of its 300 nodes"),
            std::string::npos)
      << outside.output;
  const Result memory = run_command(data + " convert --dataset " + folder.string() + " --out " +
                                    bad_out.string() + " --memory-mib 8");
  EXPECT_EQ(memory.exit_code, 2) << memory.output;
  EXPECT_NE(memory.output.find("--memory-mib"), std::string::npos) << memory.output;
  EXPECT_FALSE(fs::exists(bad_out));
}

struct BadFlag {
  const char* args;
  const char* expected;  // a piece of the message
  int status = 2;        // the command line's status (kUsageExitStatus)
};

class TrainGcnBadFlags : public ::testing::TestWithParam<BadFlag> {};

// Every flag error is "train_gcn: error: ..." with the usage status, whoever finds it (CLI11,
// the option checks, the Session against the ranks); a file that exists but is bad is status 1
// (TruncatedDatasetFileIsReportedByName).
TEST_P(TrainGcnBadFlags, ExitWithOneStatusAndMessage) {
  fs::path summary = work_dir() / "bad.json";
  fs::remove(summary);
  Result r = run(std::string(GetParam().args) + " --summary " + summary.string());
  EXPECT_EQ(r.exit_code, GetParam().status) << r.output;
  EXPECT_NE(r.output.find("train_gcn: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(GetParam().expected), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(summary)) << "a failed run left a summary behind";
}

INSTANTIATE_TEST_SUITE_P(
    Flags, TrainGcnBadFlags,
    ::testing::Values(
        BadFlag{"--model gin", "--model", 2}, BadFlag{"--num-layers 0", "--num-layers", 2},
        BadFlag{"--dropout 1.5 --epochs 1", "--dropout", 2},
        BadFlag{"--lr -1 --epochs 1", "--lr", 2}, BadFlag{"--epochs abc", "--epochs", 2},
        BadFlag{"--epochs 99999999999", "--epochs", 2},
        BadFlag{"--comm-timeout nan", "--comm-timeout", 2}, BadFlag{"--lr inf", "--lr", 2},
        BadFlag{"--epochs 1 2", "not expected: 2", 2},
        BadFlag{"--no-such-flag 1", "no-such-flag", 2},
        BadFlag{"--resume --no-resume", "excludes", 2},
        BadFlag{"--config /nonexistent/sweep.toml", "sweep.toml", 2},
        BadFlag{"--parts 3 --epochs 1", "--parts", 2}, BadFlag{"--device tpu --epochs 1", "tpu", 2},
        BadFlag{"--dataset synth:nonsense --epochs 1", "nonsense", 2},
        BadFlag{"--dataset /nonexistent/dir --epochs 1", "/nonexistent/dir", 2},
        BadFlag{"--dataset /nonexistent/file.h5 --epochs 1", "/nonexistent/file.h5", 2},
        BadFlag{"--partitions /nonexistent/store --epochs 1", "/nonexistent/store", 2},
        BadFlag{"--codec-backward int3", "--codec-backward", 2},
        BadFlag{"--aggregate-dtype fp8", "--aggregate-dtype", 2},
        BadFlag{"--aggregate-dtype bf16 --model gat --hidden-channels 64", "--model gat", 2},
        BadFlag{"--feature-dtype fp16", "--feature-dtype", 2},
        BadFlag{"--feature-dtype bf16 --parallel pipeline --stages 2", "--feature-dtype", 2},
        BadFlag{"--resume", "--resume needs --checkpoint-dir", 2},
        BadFlag{"--parallel pipeline --predict m.h5", "--predict", 2},
        BadFlag{"--keep-checkpoints 0 --checkpoint-dir ck", "--keep-checkpoints", 2},
        BadFlag{"--codec adaptive --bit-budget 9", "--bit-budget", 2},
        BadFlag{"--embedding-layer 7 --save-embeddings e.npy", "--embedding-layer", 2},
        BadFlag{"--threads -1", "--threads", 2},
        BadFlag{"--memory-budget -1", "--memory-budget", 2},
        BadFlag{"--plan --plan-ranks 4,0", "--plan-ranks", 2},
        BadFlag{"--plan-json plan.json", "only with --plan", 2},
        BadFlag{"--plan --dataset /nonexistent/dir", "/nonexistent/dir", 2},
        BadFlag{"--plan --hidden-channels 8 --plan-json /nonexistent/dir/plan.json",
                "/nonexistent/dir/plan.json", 1}));

// The launch environment: a Slurm variable that is not what Slurm writes is refused by name, on
// the usage status, before anything else runs.
TEST(TrainGcnCli, MalformedSlurmVariablesAreRefusedByName) {
  for (const auto& [env, message] :
       {std::pair{"SLURM_JOB_ID=7 SLURM_NTASKS=1 SLURM_PROCID=abc", "SLURM_PROCID='abc'"},
        std::pair{"SLURM_JOB_ID=7 SLURM_NTASKS=1 SLURM_CPUS_PER_TASK=0",
                  "SLURM_CPUS_PER_TASK=0"}}) {
    const Result r = run("--epochs 1", env);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

// A sweep's settings in a file (CLI11's TOML/INI): both spellings of the names, switches and
// booleans, comments; the command line wins over the file.
TEST(TrainGcnCli, ConfigFileSetsFlagsAndTheCommandLineWins) {
  const fs::path toml = work_dir() / "sweep.toml", ini = work_dir() / "sweep.ini";
  std::ofstream(toml) << "# one point of a sweep\nnum_layers = 2\nhidden-channels = 16\n"
                         "use_sage = true\nbatch_norm = true\nepochs = 5\n"
                         "dataset = \"synth:default\"\n";
  std::ofstream(ini) << "; the same as INI\nnum_layers=2\nhidden_channels=16\nepochs=5\n";
  for (const fs::path& config : {toml, ini}) {
    const fs::path summary = work_dir() / "config_summary.json";
    fs::remove(summary);
    const Result r =
        run("--config " + config.string() + " --epochs 3 --quiet --summary " + summary.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json s = nlohmann::json::parse(read_file(summary));
    EXPECT_EQ(s["num_layers"], 2) << config;
    EXPECT_EQ(s["hidden_channels"], 16) << config;
    EXPECT_EQ(s["epochs"], 3) << config << ": the command line wins";
    EXPECT_EQ(s["model"], config == toml ? "sage" : "gcn") << config;
    EXPECT_EQ(s["batch_norm"], config == toml) << config;
  }
}

TEST(TrainGcnCli, BadConfigFilesAreRefusedByName) {
  struct Case {
    std::string name, text, message;
  };
  const std::vector<Case> cases = {
      {"misspelt.toml", "num_layerz = 2\n", "num_layerz"},
      {"section.ini", "[train]\nnum_layers = 2\n", "section.ini"},
      {"value.toml", "epochs = many\n", "--epochs"},
  };
  for (const Case& c : cases) {
    const fs::path file = work_dir() / c.name;
    std::ofstream(file) << c.text;
    const Result r = run("--config " + file.string() + " --quiet");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.message << "\n" << r.output;
  }
  const Result missing = run("--config " + (work_dir() / "absent.toml").string());
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("absent.toml"), std::string::npos) << missing.output;
}

// The metrics file can be followed while training runs: whole lines appear epoch by epoch, and
// a run stopped by SIGTERM keeps the epochs it finished.
TEST(TrainGcnCli, MetricsCanBeFollowedWhileTraining) {
  const fs::path metrics = work_dir() / "live.jsonl", pid_file = work_dir() / "live.pid";
  fs::remove(metrics);
  const std::string command = "sh -c 'echo $$ > " + pid_file.string() + "; exec " + TRAIN_GCN_PATH +
                              " --epochs 100000 --hidden-channels 8 --quiet " + "--metrics " +
                              metrics.string() + "' > " + (work_dir() / "live.log").string() +
                              " 2>&1 &";
  ASSERT_EQ(std::system(command.c_str()), 0);
  const auto lines = [&] {
    std::ifstream in(metrics);
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  };
  const auto start = std::chrono::steady_clock::now();
  while (lines().size() < 3 && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const pid_t pid = std::stoi(read_file(pid_file));
  const std::vector<nlohmann::json> seen = lines();
  ASSERT_GE(seen.size(), 3u) << read_file(work_dir() / "live.log");
  EXPECT_EQ(::kill(pid, 0), 0) << "still training while its metrics are read";
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i]["epoch"], i + 1);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(90))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(::kill(pid, 0), 0) << "SIGTERM did not stop it";
  EXPECT_GE(lines().size(), seen.size()) << "a stopped run keeps its metrics";
}

// The CPU kernels of every instruction-set level this machine runs train the same model: the
// summaries (without timings) are identical. A level that is unknown, or that the CPU lacks, is
// refused by name.
TEST(TrainGcnCli, EveryCpuLevelGivesTheSameSummary) {
  const fs::path summary = work_dir() / "level.json";
  std::string baseline;
  int levels = 0;
  for (const char* level : {"baseline", "avx", "avx2", "avx512"}) {
    fs::remove(summary);
    const Result r = run(std::string(kQuick) + " --summary " + summary.string(),
                         std::string("TESSERA_CPU=") + level);
    if (r.exit_code != 0 && r.output.find("does not run") != std::string::npos) {
      std::printf("[ skipped  ] %s: not run by this CPU\n", level);
      continue;
    }
    if (r.exit_code != 0 && r.output.find("only with TESSERA_CPU_DISPATCH") != std::string::npos) {
      std::printf("[ skipped  ] %s: not in this build (no CPU dispatch)\n", level);
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << level << "\n" << r.output;
    const nlohmann::json s = nlohmann::json::parse(read_file(summary));
    EXPECT_EQ(s["provenance"]["cpu_kernels"].get<std::string>().rfind(level, 0), 0u)
        << s["provenance"];
    const std::string stripped = strip_timings(s).dump();
    if (baseline.empty()) baseline = stripped;
    EXPECT_EQ(stripped, baseline) << level << " trains another model than the baseline";
    ++levels;
  }
  EXPECT_GE(levels, 1);
  const Result bad = run(std::string(kQuick), "TESSERA_CPU=avx3");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;  // a usage error, not std::terminate
  EXPECT_NE(bad.output.find("train_gcn: error: "), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("TESSERA_CPU=avx3: expected baseline, avx, avx2 or avx512"),
            std::string::npos)
      << bad.output;
  const Result bad_prefetch = run(std::string(kQuick), "TESSERA_SPMM_PREFETCH=l3");
  EXPECT_EQ(bad_prefetch.exit_code, 2) << bad_prefetch.output;
  EXPECT_NE(bad_prefetch.output.find("train_gcn: error: "), std::string::npos)
      << bad_prefetch.output;
  EXPECT_NE(bad_prefetch.output.find("TESSERA_SPMM_PREFETCH=l3: expected l1 or l2"),
            std::string::npos)
      << bad_prefetch.output;
}

// The OpenBLAS core of the widest vectors the CPU runs, from --version's CPU kernels; empty
// without AVX.
std::string best_openblas_core() {
  const Result probe = run("--version");
  EXPECT_EQ(probe.exit_code, 0) << probe.output;
  const auto has = [&](const char* level) {
    return probe.output.find(std::string("CPU kernels: ") + level) != std::string::npos;
  };
  return has("avx512") ? "SkylakeX" : has("avx2") ? "Haswell" : has("avx") ? "SandyBridge" : "";
}

// OpenBLAS's kernels are checked against the CPU: forced onto its SSE3 core (as OpenBLAS 0.3.21
// picks on CPUs it does not know), --version names the weaker core and the fix, a training
// warns on stderr (with the set-up messages, --quiet too) and the summary's provenance says it;
// with the core the CPU runs best, nothing is said.
TEST(TrainGcnCli, AWeakOpenBlasCoreIsNamedWithItsFix) {
  const std::string best = best_openblas_core();
  if (best.empty()) GTEST_SKIP() << "this CPU has no AVX: Prescott is as good as it gets";
  const Result version = run("--version", "OPENBLAS_CORETYPE=Prescott");
  EXPECT_NE(version.output.find("OpenBLAS core Prescott is weaker than this CPU's " + best +
                                " (set OPENBLAS_CORETYPE=" + best + ")"),
            std::string::npos)
      << version.output;
  const fs::path summary = work_dir() / "blas.json";
  const std::string quick = "--dataset synth:default --epochs 2 --hidden-channels 8";
  const Result weak = run(quick + " --summary " + summary.string(), "OPENBLAS_CORETYPE=Prescott");
  ASSERT_EQ(weak.exit_code, 0) << weak.output;
  EXPECT_NE(weak.output.find("Warning: OpenBLAS chose its Prescott GEMM kernels, but this CPU "
                             "runs its " +
                             best + " kernels"),
            std::string::npos)
      << weak.output;
  const nlohmann::json s = nlohmann::json::parse(read_file(summary));
  EXPECT_NE(s["provenance"]["cpu_kernels"].get<std::string>().find("OPENBLAS_CORETYPE=" + best),
            std::string::npos);
  const Result right = run(quick, "OPENBLAS_CORETYPE=" + best);
  ASSERT_EQ(right.exit_code, 0) << right.output;
  EXPECT_EQ(right.output.find("Warning: OpenBLAS"), std::string::npos) << right.output;
}

// With OPENBLAS_CORETYPE unset and an OpenBLAS that misdetects the CPU (preloaded: it reports
// Prescott until the variable is set), train_gcn starts again with the core the CPU runs best:
// --version and the summary name both cores, no warning is printed, every rank of an mpiexec
// job restarts before MPI starts, and the job trains the model a run with that core set by hand
// trains. Without the stand-in, nothing is weaker either way.
TEST(TrainGcnCli, AMisdetectedOpenBlasCoreIsReplacedBeforeTheStart) {
  const std::string best = best_openblas_core();
  if (best.empty()) GTEST_SKIP() << "this CPU has no AVX: Prescott is as good as it gets";
  // verify_asan_link_order=0: the stand-in comes before the sanitizer's runtime in ASan builds.
  const std::string misdetecting =
      std::string("-u OPENBLAS_CORETYPE LD_PRELOAD=") + MISDETECTING_OPENBLAS +
      " ASAN_OPTIONS=" + (std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "") +
      ":verify_asan_link_order=0";
  const Result version = run("--version", misdetecting);
  ASSERT_EQ(version.exit_code, 0) << version.output;
  EXPECT_NE(version.output.find("OpenBLAS core " + best +
                                " chosen by Tessera (OpenBLAS chose "
                                "Prescott)"),
            std::string::npos)
      << version.output;
  const Result unset = run("--version", "-u OPENBLAS_CORETYPE");
  EXPECT_EQ(unset.output.find("is weaker"), std::string::npos) << unset.output;

  const std::string quick = "--dataset synth:default --epochs 2 --hidden-channels 8 --quiet";
  const fs::path restarted = work_dir() / "restarted.json", by_hand = work_dir() / "by_hand.json";
  const Result job = run_command("env " + misdetecting + " " + MPIEXEC_PATH + " -n 2 " +
                                 TRAIN_GCN_PATH + " " + quick + " --summary " + restarted.string());
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_EQ(job.output.find("Warning: OpenBLAS"), std::string::npos) << job.output;
  const Result hand = run_command("env OPENBLAS_CORETYPE=" + best + " " + MPIEXEC_PATH + " -n 2 " +
                                  TRAIN_GCN_PATH + " " + quick + " --summary " + by_hand.string());
  ASSERT_EQ(hand.exit_code, 0) << hand.output;
  const nlohmann::json a = nlohmann::json::parse(read_file(restarted));
  EXPECT_NE(a["provenance"]["cpu_kernels"].get<std::string>().find("chosen by Tessera"),
            std::string::npos)
      << a["provenance"];
  EXPECT_EQ(strip_timings(a).dump(),
            strip_timings(nlohmann::json::parse(read_file(by_hand))).dump());
}

}  // namespace
