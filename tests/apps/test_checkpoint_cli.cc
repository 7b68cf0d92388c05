// SPDX-License-Identifier: Apache-2.0
// `mpiexec -n K train_gcn --checkpoint-dir DIR` from the outside: a run stopped by SIGUSR1 on
// one rank and started again equals the uninterrupted run bit for bit (metrics, summary, final
// weights); a crash between writing a checkpoint and renaming it, and a rank killed with
// SIGKILL, end the job non-zero within seconds and the next start continues from the last
// checkpoint; a checkpoint of 4 ranks continues on 2; pipelined runs stop and resume bit for
// bit too, and checkpoints move between the modes; bad checkpoints, directories and Slurm
// task counts are refused on every rank with one clear message and nothing overwritten.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/apps/cli_test_util.h"
#include "engine/checkpoint.h"

namespace {

namespace cli_test = tessera::cli_test;

namespace fs = std::filesystem;
using Json = nlohmann::json;

using cli_test::Result;
using cli_test::read_text;

fs::path work_dir() { return cli_test::work_dir("tessera_checkpoint_cli"); }

// `mpiexec -n ranks train_gcn ARGS` with one thread per rank, under a 120 s guard.
Result train_gcn(int ranks, const std::string& args, const std::string& env = "") {
  return cli_test::run(std::string(MPIEXEC_PATH) + " -n " + std::to_string(ranks) + " " +
                           TRAIN_GCN_PATH + " --quiet " + args,
                       work_dir() / "out.log", env);
}

// A small model on the default synthetic graph: 30 epochs take well under a second per rank.
std::string model_args(int epochs = 30, int hidden = 32) {
  return "--dataset synth:default --hidden-channels " + std::to_string(hidden) +
         " --num-layers 2 --epochs " + std::to_string(epochs) + " --eval-every 1";
}

std::string outputs(const std::string& name) {
  const fs::path base = work_dir() / name;
  return " --metrics " + (base.string() + ".jsonl") + " --summary " + (base.string() + ".json") +
         " --checkpoint-dir " + (base.string() + "-checkpoints");
}

fs::path checkpoints(const std::string& name) { return work_dir() / (name + "-checkpoints"); }

std::vector<Json> metrics(const std::string& name) {
  std::vector<Json> lines;
  std::ifstream in(work_dir() / (name + ".jsonl"));
  for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line));
  return lines;
}

Json summary(const std::string& name) { return Json::parse(read_text(work_dir() / (name + ".json"))); }

// Removes the measured keys (times, memory) of a summary or metrics line, and the provenance
// (command line, hosts), which differs between any two runs.
Json deterministic(Json j) {
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      const bool measured = (key.size() > 2 && key.compare(key.size() - 2, 2, "_s") == 0) ||
                            key.rfind("peak_rss_bytes", 0) == 0 || key == "seconds" ||
                            key == "epoch_s_median" || key == "comm_s_median" ||
                            key == "comm_hidden_s_median" || key == "provenance";
      if (!measured) out[key] = deterministic(it.value());
    }
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& e : j) out.push_back(deterministic(e));
    return out;
  }
  return j;
}

std::vector<float> final_weights(const std::string& name, int epochs) {
  const fs::path file = checkpoints(name) / tessera::checkpoint_file_name(0, epochs);
  return tessera::checkpoint_from_image(tessera::read_file_bytes(file), "checkpoint " + name).params;
}

// The uninterrupted runs the others are compared with (made once per rank count, codec and
// mode arguments).
const std::string& uninterrupted(int ranks, const std::string& codec = "none",
                                 const std::string& mode = "", const std::string& mode_name = "") {
  static std::map<std::string, std::string> made;
  const std::string name =
      "full" + std::to_string(ranks) + (codec == "none" ? "" : codec) + mode_name;
  if (!made.count(name)) {
    const Result r = train_gcn(ranks, model_args() + mode + " --codec " + codec + outputs(name));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    made[name] = name;
  }
  return made[name];
}

// Run `name` (resumed) trained exactly as run `full`: every metrics line, the summary and the
// final weights, bit for bit.
void expect_identical_runs(const std::string& full, const std::string& name) {
  const std::vector<Json> a = metrics(full), b = metrics(name);
  ASSERT_EQ(a.size(), 30u);
  ASSERT_EQ(b.size(), 30u);
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(deterministic(a[i]), deterministic(b[i])) << name << ": metrics line " << i + 1;
  EXPECT_EQ(deterministic(summary(full)), deterministic(summary(name))) << name;
  EXPECT_EQ(final_weights(full, 30), final_weights(name, 30)) << name;
}

class StopAndResume : public ::testing::TestWithParam<std::string> {};

// With every kind of codec: f32, and the stochastic-rounding integer codecs, whose rounding is
// keyed by (seed, epoch, node), so a resumed run draws what the uninterrupted one drew.
TEST_P(StopAndResume, StoppedBySignalAndResumedEqualsUninterrupted) {
  const std::string& codec = GetParam();
  const std::string& full = uninterrupted(2, codec);
  const std::string name = "stop2" + codec;
  const std::string args = model_args() + " --codec " + codec + outputs(name);
  // Rank 1 receives SIGUSR1 at epoch 15: both ranks stop after it, rank 0 checkpoints, exit 75.
  const Result stopped = train_gcn(2, args, "TESSERA_FAULT_INJECT=1:15:usr1");
  ASSERT_EQ(stopped.exit_code, 75) << stopped.output;
  EXPECT_NE(stopped.output.find("Stopped by a stop signal on another rank after run 1, epoch 15"),
            std::string::npos)
      << stopped.output;
  EXPECT_EQ(metrics(name).size(), 15u);                     // the epochs so far, streamed
  EXPECT_FALSE(fs::exists(work_dir() / (name + ".json")));  // nothing final yet
  const Result resumed = train_gcn(2, args);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("Resuming from"), std::string::npos) << resumed.output;
  expect_identical_runs(full, name);
}

INSTANTIATE_TEST_SUITE_P(Codecs, StopAndResume, ::testing::Values("none", "int8", "int4"));

// The pipelined modes: the stages' weights and Adam moments are gathered into the whole model,
// the historical buffers into (num_nodes, F) arrays; a resume takes each stage's share back (and
// in hybrid mode rebuilds the halo rows and the other parts' gradient contributions from them,
// or, for GAT, whose contributions cannot be rebuilt, takes them from the checkpoint too),
// so the resumed run equals the uninterrupted one bit for bit, with integer codecs too.
struct Pipelined {
  const char* name;
  int ranks;
  const char* mode;
  const char* codec;
};

void PrintTo(const Pipelined& p, std::ostream* out) {
  *out << p.ranks << " ranks, " << p.mode << " --codec " << p.codec;
}

class PipelinedStopAndResume : public ::testing::TestWithParam<Pipelined> {};

TEST_P(PipelinedStopAndResume, StoppedBySignalAndResumedEqualsUninterrupted) {
  const Pipelined& p = GetParam();
  const std::string mode = std::string(" ") + p.mode;
  const std::string& full = uninterrupted(p.ranks, p.codec, mode, p.name);
  const std::string name = std::string("stop_") + p.name + p.codec;
  const std::string args = model_args() + mode + " --codec " + p.codec + outputs(name);
  // The last rank (the last stage of the last part) receives SIGUSR1 at epoch 15.
  const Result stopped =
      train_gcn(p.ranks, args, "TESSERA_FAULT_INJECT=" + std::to_string(p.ranks - 1) + ":15:usr1");
  ASSERT_EQ(stopped.exit_code, 75) << stopped.output;
  EXPECT_EQ(metrics(name).size(), 15u);
  const Result resumed = train_gcn(p.ranks, args);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("Resuming from"), std::string::npos) << resumed.output;
  EXPECT_EQ(resumed.output.find("holds no historical buffers"), std::string::npos)
      << resumed.output;
  expect_identical_runs(full, name);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, PipelinedStopAndResume,
    ::testing::Values(Pipelined{"pipeline", 2, "--parallel pipeline --chunks 3", "none"},
                      Pipelined{"pipeline", 2, "--parallel pipeline --chunks 3", "int8"},
                      Pipelined{"hybrid", 4, "--parallel hybrid --stages 2", "none"},
                      Pipelined{"hybrid", 4, "--parallel hybrid --stages 2", "int4"},
                      // GAT pushes its gradients: the pending pushes and the other parts'
                      // contributions are in the checkpoint.
                      Pipelined{"hybrid_gat", 4, "--parallel hybrid --stages 2 --model gat --heads 4",
                                "none"}),
    [](const auto& param_info) {
      return std::string(param_info.param.name) + "_" + param_info.param.codec;
    });

// A checkpoint holds the whole model whatever the mode, so a pipelined run continues in graph
// mode and a graph-mode one in a pipeline (whose historical buffers then start at zero, as in a
// run's first epoch, with a note).
TEST(CheckpointCli, CheckpointsMoveBetweenModes) {
  const std::string pipe = " --parallel pipeline --chunks 3";
  const Result stopped = train_gcn(2, model_args() + pipe + outputs("pipe_to_graph"),
                                   "TESSERA_FAULT_INJECT=0:12:usr1");
  ASSERT_EQ(stopped.exit_code, 75) << stopped.output;
  const Result graph = train_gcn(2, model_args() + outputs("pipe_to_graph"));
  ASSERT_EQ(graph.exit_code, 0) << graph.output;
  EXPECT_NE(graph.output.find("12 of 30 epochs done"), std::string::npos) << graph.output;
  EXPECT_EQ(metrics("pipe_to_graph").size(), 30u);

  const Result first =
      train_gcn(2, model_args() + outputs("graph_to_pipe"), "TESSERA_FAULT_INJECT=1:12:usr1");
  ASSERT_EQ(first.exit_code, 75) << first.output;
  const Result piped = train_gcn(2, model_args() + pipe + outputs("graph_to_pipe"));
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_NE(piped.output.find("Note: the checkpoint holds no historical buffers"),
            std::string::npos)
      << piped.output;
  EXPECT_EQ(metrics("graph_to_pipe").size(), 30u);
  // Both continued from the weights they stopped with: their accuracy is the uninterrupted
  // graph run's within what the pipeline's staleness changes.
  const double a = summary(uninterrupted(2))["final_test_acc"];
  for (const char* name : {"pipe_to_graph", "graph_to_pipe"}) {
    const double b = summary(name)["final_test_acc"];
    std::printf("[ measured ] final test accuracy: graph %.4f, %s %.4f\n", a, name, b);
    EXPECT_LE(std::fabs(a - b), 0.05) << name;
  }
}

TEST(CheckpointCli, CrashBetweenWriteAndRenameResumesFromThePreviousCheckpoint) {
  const std::string& full = uninterrupted(2);
  const Result crashed = train_gcn(2, model_args() + outputs("crash") + " --checkpoint-every 5",
                                   "TESSERA_FAULT_INJECT=0:10:checkpoint");
  EXPECT_NE(crashed.exit_code, 0) << crashed.output;
  EXPECT_LT(crashed.seconds, 30.0) << crashed.output;
  const auto files = tessera::list_checkpoints(checkpoints("crash"));
  ASSERT_EQ(files.size(), 1u) << crashed.output;
  EXPECT_EQ(files[0].epoch, 5);
  const Result resumed = train_gcn(2, model_args() + outputs("crash") + " --checkpoint-every 5");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("checkpoint-r0000-e0000005.h5: run 1, 5 of 30"), std::string::npos)
      << resumed.output;
  EXPECT_EQ(deterministic(summary(full)), deterministic(summary("crash")));
}

TEST(CheckpointCli, KilledRankEndsTheJobAndResumeCompletes) {
  const std::string& full = uninterrupted(4);
  const Result killed = train_gcn(4, model_args() + outputs("kill") + " --checkpoint-every 5",
                                  "TESSERA_FAULT_INJECT=2:13:kill");
  EXPECT_NE(killed.exit_code, 0) << killed.output;
  EXPECT_LT(killed.seconds, 30.0) << killed.output;
  std::printf("[ measured ] 4 ranks, rank 2 SIGKILLed at epoch 13: exit %d after %.2f s\n",
              killed.exit_code, killed.seconds);
  const Result resumed = train_gcn(4, model_args() + outputs("kill") + " --checkpoint-every 5");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("e0000010.h5: run 1, 10 of 30"), std::string::npos)
      << resumed.output;
  // The same ranks resume exactly where the checkpoint left off: the killed run's epochs 11-13
  // are retrained and the result is the uninterrupted run's, bit for bit.
  expect_identical_runs(full, "kill");
}

TEST(CheckpointCli, CheckpointOfFourRanksResumesOnTwo) {
  const std::string& full = uninterrupted(4);
  const Result stopped =
      train_gcn(4, model_args() + outputs("elastic"), "TESSERA_FAULT_INJECT=3:12:usr1");
  ASSERT_EQ(stopped.exit_code, 75) << stopped.output;
  const Result resumed = train_gcn(2, model_args() + outputs("elastic"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("12 of 30 epochs done (checkpoint of 4 ranks, now 2)"),
            std::string::npos)
      << resumed.output;
  const double a = summary(full)["final_test_acc"], b = summary("elastic")["final_test_acc"];
  std::printf("[ measured ] final test accuracy: 4 ranks %.4f, 4 then 2 ranks %.4f\n", a, b);
  EXPECT_LE(std::fabs(a - b), 0.005);
  EXPECT_EQ(metrics("elastic").size(), 30u);
}

// Bad input: one message on rank 0, exit `status` on every rank (2, the usage status: the flags
// do not fit the checkpoints or the launch; 1: a bad file), no hang, nothing valid overwritten.
void expect_refused(const Result& r, const std::string& needle, int status) {
  EXPECT_EQ(r.exit_code, status) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "expected '" << needle << "' in\n"
                                                      << r.output;
  EXPECT_LT(r.seconds, 30.0);
}

// A pipelined checkpoint whose historical buffers do not fit the graph (rewritten with a valid
// checksum, as a file from another dataset of the same settings could not be) is refused on
// resume, naming the layer, on every rank.
TEST(CheckpointCli, HistoricalBuffersOfTheWrongShapeAreRefused) {
  const std::string args = model_args(4) + " --parallel pipeline --chunks 3" + outputs("shape");
  const Result first = train_gcn(2, args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path file = checkpoints("shape") / tessera::checkpoint_file_name(0, 4);
  tessera::CheckpointState c =
      tessera::checkpoint_from_image(tessera::read_file_bytes(file), "checkpoint");
  ASSERT_FALSE(c.runner_state.empty());
  c.epoch = 3;  // resumable under --epochs 4
  c.adam_steps = 3;
  c.history.pop_back();
  tessera::Tensor& values = c.runner_state.front().values;
  values.resize(values.rows() - 1, values.cols());
  fs::remove(file);
  tessera::write_checkpoint(checkpoints("shape"), c, false);
  expect_refused(train_gcn(2, args), "the historical buffers of layer", 1);
}

TEST(CheckpointCli, BadCheckpointsAndDirectoriesAreRefused) {
  // A checkpoint of another width: refused naming the flag; the file is untouched.
  const Result first = train_gcn(2, model_args(4) + outputs("width"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path saved = checkpoints("width") / tessera::checkpoint_file_name(0, 4);
  const std::string before = read_text(saved);
  expect_refused(train_gcn(2, model_args(4, 64) + outputs("width")),
                 "--hidden-channels: checkpoint 32, this run 64", 2);
  EXPECT_EQ(read_text(saved), before);

  // A truncated newest checkpoint is set aside with a warning; the older one is used.
  const Result periodic = train_gcn(2, model_args(8) + outputs("trunc") + " --checkpoint-every 4");
  ASSERT_EQ(periodic.exit_code, 0) << periodic.output;
  const fs::path newest = checkpoints("trunc") / tessera::checkpoint_file_name(0, 8);
  fs::resize_file(newest, fs::file_size(newest) / 2);
  const Result fallback = train_gcn(2, model_args(8) + outputs("trunc") + " --checkpoint-every 4");
  EXPECT_EQ(fallback.exit_code, 0) << fallback.output;
  EXPECT_NE(fallback.output.find("warning: skipping checkpoint"), std::string::npos)
      << fallback.output;
  EXPECT_NE(fallback.output.find("e0000004.h5: run 1, 4 of 8"), std::string::npos)
      << fallback.output;
  // Only truncated ones, and --resume: an error.
  for (const auto& f : tessera::list_checkpoints(checkpoints("trunc"))) fs::resize_file(f.path, 100);
  expect_refused(train_gcn(2, model_args(8) + outputs("trunc") + " --resume"),
                 "no valid checkpoint", 2);

  // A directory that cannot be created (under a regular file; root ignores permission bits).
  std::ofstream(work_dir() / "plain") << "x";
  expect_refused(train_gcn(2, model_args(4) + " --checkpoint-dir " +
                                  (work_dir() / "plain" / "checkpoints").string()),
                 "--checkpoint-dir", 1);
}

TEST(CheckpointCli, SlurmTaskCountMustAgreeWithParts) {
  expect_refused(train_gcn(2, model_args(4) + " --parts 2", "SLURM_JOB_ID=7 SLURM_NTASKS=4"),
                 "--parts 2 disagrees with the Slurm job's 4 tasks (SLURM_NTASKS)", 2);
  // srun --mpi=none: each task its own 1-rank MPI job, told it is task 3 of 4.
  expect_refused(train_gcn(1, model_args(4),
                           "SLURM_JOB_ID=7 SLURM_NTASKS=4 SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=3"),
                 "did not join one MPI job", 2);
  // mpiexec inside an allocation: every rank sees its proxy's SLURM_PROCID=0. Works.
  const Result inside = train_gcn(
      2, model_args(2), "SLURM_JOB_ID=7 SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=1 SLURM_PROCID=0");
  EXPECT_EQ(inside.exit_code, 0) << inside.output;
}

}  // namespace
