// SPDX-License-Identifier: Apache-2.0
// partition_graph and `mpiexec -n K train_gcn` from the outside: a partition store trains on its
// K ranks with the same losses as in-process partitioning and as one rank; each kind of bad
// distributed input (flags, foreign or broken stores, unusable partitions) and an injected fault
// end the whole job within seconds, naming the problem and leaving no output files behind.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/loaders.h"
#include "datasets/synthetic.h"
#include "partition/partition_store.h"
#include "partition/plan_file.h"
#include "tests/apps/cli_test_util.h"

namespace {

namespace cli_test = tessera::cli_test;

namespace fs = std::filesystem;

using cli_test::Result;
using cli_test::read_text;

fs::path work_dir() { return cli_test::work_dir("tessera_distributed_cli"); }

// Runs `command` (one thread per process) under a 120 s guard, so that a hang fails the test
// instead of CTest's timeout.
Result run(const std::string& command, const std::string& env = "") {
  return cli_test::run(command, work_dir() / "out.log", env);
}

std::string train_gcn(int ranks, const std::string& args) {
  return std::string(MPIEXEC_PATH) + " -n " + std::to_string(ranks) + " " + TRAIN_GCN_PATH + " " +
         args;
}

std::string partition_graph(const std::string& args) {
  return std::string(PARTITION_GRAPH_PATH) + " --quiet " + args;
}

// Stores of synth:default made once: K = 2 with METIS, K = 4 with random (seed 0, which is
// also what train_gcn's default --seed 0 gives its in-process partitioner).
struct Store {
  fs::path dir;
  Result made;
};
const Store& store(int k) {
  static std::map<int, Store> stores;
  if (!stores.count(k)) {
    const fs::path dir = work_dir() / ("store" + std::to_string(k));
    const std::string method = k == 2 ? "metis" : "random";
    stores[k] = {
        dir, run(partition_graph("--dataset synth:default --seed 0 --parts " + std::to_string(k) +
                                 " --partition " + method + " --out " + dir.string()))};
  }
  return stores[k];
}

// A small synthetic dataset written as HDF5, changed by `edit` first.
template <class Edit>
fs::path write_dataset(const std::string& name, std::int64_t nodes, Edit edit) {
  tessera::SyntheticConfig c;
  c.name = name;
  c.num_nodes = nodes;
  c.num_edges = 4 * nodes;
  c.num_features = 8;
  c.num_classes = 2;
  tessera::Dataset d = tessera::generate_synthetic(c);
  edit(d);
  const fs::path file = work_dir() / (name + ".h5");
  tessera::write_hdf5(d, file);
  return file;
}

// 200 nodes whose training nodes all lie in the first half: block partitioning into two parts
// leaves part 1 without one.
fs::path first_half_train_dataset() {
  return write_dataset("first_half_train", 200, [](tessera::Dataset& d) {
    d.train_idx.clear();
    d.valid_idx.clear();
    d.test_idx.clear();
    for (tessera::GlobalId v = 0; v < 200; ++v) (v < 100 ? d.train_idx : d.test_idx).push_back(v);
  });
}

// The names of the entries of `dir`.
std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    names.insert(e.path().filename().string());
  return names;
}

fs::path copy_of_store(int k, const std::string& name) {
  const fs::path dir = work_dir() / name;
  fs::remove_all(dir);
  fs::copy(store(k).dir, dir);
  return dir;
}

std::vector<double> losses(const fs::path& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);)
    out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

// Per-epoch losses equal up to `rel_tol` (0: bit for bit); else the first differing epoch and
// the largest relative difference.
::testing::AssertionResult same_losses(const std::vector<double>& a, const std::vector<double>& b,
                                       double rel_tol) {
  if (a.size() != b.size() || a.empty())
    return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " epochs";
  std::ptrdiff_t first = -1;
  double largest = 0;
  for (std::size_t e = 0; e < a.size(); ++e) {
    const double rel = std::abs(a[e] - b[e]) / std::max(std::abs(b[e]), 1e-30);
    largest = std::max(largest, rel);
    if (rel > rel_tol && first < 0) first = static_cast<std::ptrdiff_t>(e);
  }
  if (first < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "epoch " << first + 1 << ": loss " << a[first] << " vs " << b[first]
         << "; largest relative difference " << largest << " (tolerance " << rel_tol << ")";
}

// One line of the output (the error message) holds every piece.
void expect_output_has(const Result& r, const std::vector<std::string>& pieces) {
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (std::all_of(pieces.begin(), pieces.end(),
                    [&](const std::string& piece) { return line.find(piece) != line.npos; }))
      return;
  }
  std::string wanted;
  for (const std::string& piece : pieces) wanted += " '" + piece + "'";
  ADD_FAILURE() << "no line holds all of" << wanted << " in:\n" << r.output;
}

// Runs train_gcn on `ranks` ranks with a summary and a metrics file and expects it to fail
// within `limit_s` with a message holding every piece, leaving neither file behind (a failure
// inside the training loop too: the metrics streamed so far are removed on rank 0).
struct RefusedRun {
  Result result;
  fs::path summary, metrics;
};

// Runs train_gcn on `ranks` ranks with a summary and a metrics file, its output in <tag>.log
// and its files named after `tag` (so that jobs can run at once).
RefusedRun train_refused(int ranks, const std::string& args, const std::string& env,
                         const std::string& tag) {
  const fs::path summary = work_dir() / (tag + ".json"), metrics = work_dir() / (tag + ".jsonl");
  fs::remove(summary);
  fs::remove(metrics);
  Result r = cli_test::run(train_gcn(ranks, args + " --quiet --summary " + summary.string() +
                                                " --metrics " + metrics.string()),
                           work_dir() / (tag + ".log"), env);
  return {std::move(r), summary, metrics};
}

// Expects the run to have failed within `limit_s`, a line of its output holding all of `pieces`,
// and neither file written.
void expect_refused(const RefusedRun& run, const std::vector<std::string>& pieces, double limit_s) {
  const Result& r = run.result;
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.seconds, limit_s) << r.output;
  expect_output_has(r, pieces);
  EXPECT_FALSE(fs::exists(run.summary)) << "a failed run left its summary behind";
  EXPECT_FALSE(fs::exists(run.metrics)) << "a failed run left its metrics behind";
}

void expect_train_refused(int ranks, const std::string& args,
                          const std::vector<std::string>& pieces, const std::string& env = "",
                          double limit_s = 30.0) {
  expect_refused(train_refused(ranks, args, env, "refused"), pieces, limit_s);
}

// --partition block on a Tessera HDF5 file: every rank reads only its rows and the parts are
// built between the ranks; the job trains as the same partition cut on rank 0 does (in the
// file's node order, which sliced parts keep), and the partition line reports the same cut.
TEST(DistributedCli, BlockPartsFromSlicesOfAnHdf5FileTrainAsRankZerosCut) {
  const fs::path file = work_dir() / "sliced.h5";
  const Result made = run(std::string(TESSERA_DATA_PATH) + " generate --preset default --out " +
                          file.string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  for (const int ranks : {2, 4}) {
    const fs::path sliced = work_dir() / "sliced.jsonl", whole = work_dir() / "whole.jsonl";
    const std::string args = " --partition block --epochs 4 --hidden-channels 16 --metrics ";
    const Result a = run(train_gcn(ranks, "--dataset " + file.string() + args + sliced.string()));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    const Result b =
        run(train_gcn(ranks, "--dataset synth:default --node-order none" + args + whole.string()));
    ASSERT_EQ(b.exit_code, 0) << b.output;
    EXPECT_EQ(losses(sliced).size(), 4u);
    EXPECT_EQ(losses(sliced), losses(whole)) << ranks << " ranks";
    EXPECT_NE(a.output.find("each rank its own rows"), std::string::npos) << a.output;
    EXPECT_EQ(b.output.find("each rank its own rows"), std::string::npos) << b.output;
    const std::string line = "Partitioned (block) into " + std::to_string(ranks) + " parts";
    auto cut = [&](const std::string& output) {
      const auto at = output.find(line);
      return at == std::string::npos ? std::string("none")
                                     : output.substr(at, output.find(',', at) - at);
    };
    EXPECT_EQ(cut(a.output), cut(b.output)) << a.output << b.output;
    EXPECT_NE(cut(a.output), "none") << a.output;
  }
  const fs::path missing = work_dir() / "missing.h5";
  expect_train_refused(2, "--dataset " + missing.string() + " --partition block --epochs 2",
                       {"reading this rank's rows", missing.string(), "no such file"});
}

// METIS in process on an .h5 file: rank 0 partitions it without the features and each rank
// reads its own feature rows, renumbered or not, normalised or not: the same numbers as rank 0
// holding the whole dataset (synth:default is the file's dataset). partition_graph alike.
TEST(DistributedCli, FeatureRowsReadByTheirRanksTrainAsRankZerosWhole) {
  const fs::path file = work_dir() / "owners.h5";
  const Result made =
      run(std::string(TESSERA_DATA_PATH) + " generate --preset default --out " + file.string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  for (const int ranks : {2, 4}) {
    for (const char* flags : {"", " --node-order none --normalize-features"}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks," + flags);
      const fs::path owners = work_dir() / "owners.jsonl", whole = work_dir() / "whole.jsonl";
      const std::string args =
          std::string(" --partition metis --epochs 4 --hidden-channels 16") + flags + " --metrics ";
      const Result a = run(train_gcn(ranks, "--dataset " + file.string() + args + owners.string()));
      ASSERT_EQ(a.exit_code, 0) << a.output;
      const Result b = run(train_gcn(ranks, "--dataset synth:default" + args + whole.string()));
      ASSERT_EQ(b.exit_code, 0) << b.output;
      EXPECT_EQ(losses(owners).size(), 4u);
      EXPECT_EQ(losses(owners), losses(whole));
      EXPECT_NE(a.output.find("each rank its own feature rows"), std::string::npos) << a.output;
      EXPECT_EQ(b.output.find("each rank its own feature rows"), std::string::npos) << b.output;
    }
  }
  // partition_graph reads each part's feature rows from the file as it writes the part: the
  // store trains as the store of the dataset held whole.
  std::map<std::string, std::vector<double>> loss;
  for (const std::string& dataset : {file.string(), std::string("synth:default")}) {
    const fs::path dir = work_dir() / (dataset == "synth:default" ? "store_whole" : "store_file");
    fs::remove_all(dir);
    const Result made_store =
        run(partition_graph("--dataset " + dataset + " --parts 2 --out " + dir.string()));
    ASSERT_EQ(made_store.exit_code, 0) << made_store.output;
    const fs::path metrics = work_dir() / "store_losses.jsonl";
    const Result trained =
        run(train_gcn(2, "--partitions " + dir.string() +
                             " --epochs 4 --hidden-channels 16 --metrics " + metrics.string()));
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    loss[dataset] = losses(metrics);
  }
  EXPECT_EQ(loss[file.string()].size(), 4u);
  EXPECT_EQ(loss[file.string()], loss["synth:default"]);
}

#ifdef PARTITION_DISTRIBUTED_PATH
// partition_distributed (PT-Scotch across Open MPI ranks; `wide`: partition_distributed64, its
// 64-bit build) on `ranks` ranks.
Result partition_distributed(int ranks, const std::string& args, bool wide = false) {
  return run(std::string(OMPI_MPIEXEC_PATH) + " --oversubscribe -n " + std::to_string(ranks) + " " +
                 (wide ? PARTITION_DISTRIBUTED64_PATH : PARTITION_DISTRIBUTED_PATH) + " " + args,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
}

// The edge cut a "Partitioned (...) into K parts: edge cut C, ..." line reports.
std::int64_t reported_cut(const std::string& output) {
  const auto at = output.find(": edge cut ");
  return at == std::string::npos ? -1 : std::stoll(output.substr(at + 11));
}

// Default's HDF5 file, and a PT-Scotch plan of it for 2 or 4 ranks, made once.
const fs::path& scotch_dataset() {
  static const fs::path file = [] {
    const fs::path f = work_dir() / "scotch.h5";
    const Result made =
        run(std::string(TESSERA_DATA_PATH) + " generate --preset default --out " + f.string());
    EXPECT_EQ(made.exit_code, 0) << made.output;
    return f;
  }();
  return file;
}

fs::path scotch_plan(int ranks, bool wide = false) {
  const fs::path plan =
      work_dir() / ("scotch-" + std::to_string(ranks) + (wide ? "-64" : "") + ".plan.h5");
  if (!fs::exists(plan)) {
    const Result r = partition_distributed(
        ranks, "--dataset " + scotch_dataset().string() + " --out " + plan.string(), wide);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    expect_output_has(r, {"default: " + std::to_string(ranks) + " parts (ptscotch", "edge cut"});
  }
  return plan;
}

// A plan from PT-Scotch across 2 and 4 ranks (and across 4 with its 64-bit build):
// deterministic; the ranks build their parts from slices of the file under it and train as the
// parts rank 0 cuts from the whole dataset under the same plan, with the cut it reports; its cut
// is within 10% of serial METIS's.
TEST(DistributedPartitioner, PlanTrainsAsRankZerosCutOfIt) {
  for (const auto& [ranks, wide] : {std::pair(2, false), std::pair(4, false), std::pair(4, true)}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks" + (wide ? ", 64-bit" : ""));
    const fs::path plan = scotch_plan(ranks, wide);
    const fs::path again = work_dir() / "again.plan.h5";
    fs::remove(again);
    const Result rerun = partition_distributed(
        ranks, "--quiet --dataset " + scotch_dataset().string() + " --out " + again.string(), wide);
    ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
    const tessera::PlanFile a = tessera::read_plan_file(plan), b = tessera::read_plan_file(again);
    EXPECT_EQ(a.plan.owner, b.plan.owner) << "PT-Scotch gave another plan on the same input";
    EXPECT_EQ(a.plan.num_parts, ranks);
    EXPECT_EQ(a.method, "ptscotch");
    const fs::path sliced = work_dir() / "plan_sliced.jsonl",
                   whole = work_dir() / "plan_whole.jsonl";
    const std::string args =
        " --partition-file " + plan.string() + " --epochs 4 --hidden-channels 16 --metrics ";
    const Result x =
        run(train_gcn(ranks, "--dataset " + scotch_dataset().string() + args + sliced.string()));
    ASSERT_EQ(x.exit_code, 0) << x.output;
    const Result y =
        run(train_gcn(ranks, "--dataset synth:default --node-order none" + args + whole.string()));
    ASSERT_EQ(y.exit_code, 0) << y.output;
    EXPECT_EQ(losses(sliced).size(), 4u);
    EXPECT_EQ(losses(sliced), losses(whole));
    EXPECT_NE(x.output.find("each rank its own rows"), std::string::npos) << x.output;
    EXPECT_EQ(reported_cut(x.output), a.edge_cut) << x.output;
    EXPECT_EQ(reported_cut(y.output), a.edge_cut) << y.output;
    const Result metis =
        run(train_gcn(ranks, "--dataset synth:default --partition metis --epochs 1"));
    ASSERT_EQ(metis.exit_code, 0) << metis.output;
    EXPECT_LE(static_cast<double>(a.edge_cut),
              1.1 * static_cast<double>(reported_cut(metis.output)))
        << metis.output;
  }
}

TEST(DistributedPartitioner, BadInputEndsEveryRankNamingIt) {
  const std::string data = "--dataset " + scotch_dataset().string();
  const fs::path out = work_dir() / "bad.plan.h5";
  fs::remove(out);
  struct Case {
    std::string args;
    std::vector<std::string> pieces;
  };
  const std::vector<Case> cases = {
      {"--dataset synth:default --out " + out.string(), {"synth:default", "not a Tessera HDF5"}},
      {"--dataset " + (work_dir() / "none.h5").string() + " --out " + out.string(),
       {"none.h5", "no such file"}},
      {data + " --parts 5000 --out " + out.string(), {"--parts 5000", "3000 nodes"}},
      {data + " --out " + scotch_dataset().string(), {"scotch.h5", "exists"}},
      {data + " --imbalance 2 --out " + out.string(), {"--imbalance"}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Result r = partition_distributed(2, c.args);
    EXPECT_NE(r.exit_code, 0) << r.output;
    expect_output_has(r, c.pieces);
    EXPECT_FALSE(fs::exists(out)) << r.output;
  }
  for (const fs::directory_entry& e : fs::directory_iterator(work_dir()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST(DistributedPartitioner, PlanFileMustFitTheJob) {
  const fs::path plan = scotch_plan(2);
  const std::string file = " --partition-file " + plan.string() + " --epochs 2";
  const std::string data = "--dataset " + scotch_dataset().string();
  expect_train_refused(4, data + file, {plan.string(), "a plan of 2 parts", "4 ranks"});
  expect_train_refused(2, "--dataset synth:default:7" + file,
                       {plan.string(), "a plan of another dataset"});
  expect_train_refused(2, data + " --partition-file " + (work_dir() / "none.plan.h5").string(),
                       {"none.plan.h5", "no such plan file"});
  expect_train_refused(2, data + " --partition-file " + scotch_dataset().string(),
                       {"scotch.h5", "not a Tessera plan file"});
  const fs::path corrupt = work_dir() / "corrupt.plan.h5";
  {
    std::ofstream junk(corrupt);
    junk << "not hdf5";
  }
  expect_train_refused(2, data + " --partition-file " + corrupt.string(), {"corrupt.plan.h5"});
  ASSERT_EQ(store(2).made.exit_code, 0) << store(2).made.output;
  expect_train_refused(2, "--partitions " + store(2).dir.string() + file,
                       {"--partition-file", "--partitions", "give one of them"});
  expect_train_refused(2, data + file + " --parallel pipeline", {"--partition-file"});
}
#else
TEST(DistributedPartitioner, NotBuilt) {
  GTEST_SKIP() << "partition_distributed was not built (no PT-Scotch or Open MPI)";
}
#endif

class StoreRuns : public ::testing::TestWithParam<int> {};

TEST_P(StoreRuns, StoreTrainsOnOneRankPerPart) {
  const int k = GetParam();
  const Store& s = store(k);
  ASSERT_EQ(s.made.exit_code, 0) << s.made.output;
  std::set<std::string> files = {"meta.json"};
  for (int p = 0; p < k; ++p) files.insert(tessera::part_file_name(p));
  EXPECT_EQ(names_in(s.dir), files);
  const nlohmann::json meta = nlohmann::json::parse(read_text(s.dir / "meta.json"));
  const fs::path summary = work_dir() / ("store_summary_" + std::to_string(k) + ".json");
  const Result r = run(train_gcn(
      k, "--partitions " + s.dir.string() + " --epochs 5 --quiet --summary " + summary.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(read_text(summary));
  EXPECT_EQ(j["ranks"], k);
  EXPECT_EQ(j["partition"]["method"], k == 2 ? "metis" : "random");
  EXPECT_GT(j["partition"]["edge_cut"].get<std::int64_t>(), 0);
  EXPECT_EQ(j["partition"]["edge_cut"], meta["stats"]["edge_cut"]);
  EXPECT_GT(j["comm_bytes_per_epoch"]["halo_forward"].get<std::uint64_t>(), 0u);
  const auto rss_max = j["peak_rss_bytes_max"].get<std::uint64_t>();
  const auto rss_sum = j["peak_rss_bytes_sum"].get<std::uint64_t>();
  EXPECT_GT(rss_max, 0u);
  EXPECT_GE(rss_sum, rss_max);
  EXPECT_LE(rss_sum, static_cast<std::uint64_t>(k) * rss_max);
}

INSTANTIATE_TEST_SUITE_P(Parts, StoreRuns, ::testing::Values(2, 4));

TEST(DistributedCli, StoreInProcessAndOneRankGiveTheSameLosses) {
  ASSERT_EQ(store(2).made.exit_code, 0) << store(2).made.output;
  // With weight decay, where Adam is not invariant to the gradients' scale.
  const std::string model =
      " --num-layers 2 --hidden-channels 32 --epochs 10 --weight-decay 5e-4 --quiet --metrics ";
  const std::map<std::string, std::string> runs = {
      {"store", train_gcn(2, "--partitions " + store(2).dir.string())},
      {"in_process", train_gcn(2, "--dataset synth:default --partition metis")},
      {"one_rank", train_gcn(1, "--dataset synth:default")}};
  std::map<std::string, std::vector<double>> loss;
  for (const auto& [name, command] : runs) {
    const fs::path metrics = work_dir() / ("losses_" + name + ".jsonl");
    const Result r = run(command + model + metrics.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    loss[name] = losses(metrics);
  }
  // The same partition gives the same numbers; k ranks differ from one only in summation order.
  EXPECT_TRUE(same_losses(loss["store"], loss["in_process"], 0.0)) << "store vs in-process";
  EXPECT_TRUE(same_losses(loss["store"], loss["one_rank"], 1e-5)) << "2 ranks vs 1";
  EXPECT_TRUE(same_losses(loss["in_process"], loss["one_rank"], 1e-5)) << "2 ranks vs 1";
}

// --plan under mpiexec: rank 0 plans for the job's ranks, every rank exits with its status;
// a bad dataset is refused on every rank, no JSON file written.
TEST(DistributedCli, PlanRunsOnRankZeroAndEveryRankExitsWithItsStatus) {
  const fs::path json = work_dir() / "plan.json";
  fs::remove(json);
  const Result ok = run(train_gcn(2, "--dataset synth:default --hidden-channels 8 --plan "
                                     "--plan-json " + json.string()));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("| graph | 2 | 2 x 1 | none |"), std::string::npos) << ok.output;
  EXPECT_TRUE(fs::exists(json));
  fs::remove(json);
  expect_train_refused(2, "--dataset /nonexistent/dir --plan --plan-json " + json.string(),
                       {"--plan", "/nonexistent/dir"});
  EXPECT_FALSE(fs::exists(json));
}

TEST(DistributedCli, PartsFlagMustMatchRanks) {
  expect_train_refused(2, "--parts 3 --epochs 2", {"--parts 3", "number of ranks (2)"});
}

TEST(DistributedCli, BadCodecFlagsAreRefused) {
  expect_train_refused(2, "--codec adaptive --codec-backward int8 --epochs 2",
                       {"--codec adaptive", "--codec-backward does not apply"});
  expect_train_refused(2, "--codec adaptive --bit-budget 9 --epochs 2",
                       {"--bit-budget", "[2, 8]", "got 9"});
  expect_train_refused(2, "--codec int3 --epochs 2", {"--codec", "int3"});
}

TEST(DistributedCli, StoreMustHaveOnePartPerRank) {
  ASSERT_EQ(store(2).made.exit_code, 0) << store(2).made.output;
  expect_train_refused(4, "--partitions " + store(2).dir.string() + " --epochs 2",
                       {store(2).dir.string(), "holds 2 parts", "4 ranks"});
}

TEST(DistributedCli, StoreOfAnotherDatasetIsRefused) {
  ASSERT_EQ(store(2).made.exit_code, 0) << store(2).made.output;
  expect_train_refused(
      2, "--partitions " + store(2).dir.string() + " --dataset synth:default:7 --epochs 2",
      {"synth:default:7", "does not match", "made from synth:default"});
}

// Only rank 1 reads part-00001.h5: one byte flipped inside its feature rows (found by their
// exact bytes) must fail the whole job through the checksum, naming the file and the rank.
TEST(DistributedCli, CorruptPartFileIsNamedWithItsRank) {
  const fs::path dir = copy_of_store(2, "corrupt_store");
  const fs::path file = dir / tessera::part_file_name(1);
  const tessera::GraphPart part = tessera::read_part(dir, tessera::read_store_meta(dir), 1);
  std::string bytes = read_text(file);
  const std::size_t at =
      bytes.find(std::string(static_cast<const char*>(part.features.raw()), part.features.bytes()));
  ASSERT_NE(at, std::string::npos) << "feature rows not found verbatim in " << file;
  char& byte = bytes[at + part.features.bytes() / 2];
  byte = static_cast<char>(byte ^ 0x10);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  expect_train_refused(2, "--partitions " + dir.string() + " --epochs 2",
                       {file.string(), "rank 1", "checksum"});
}

// Two stores of one dataset and K (METIS, and METIS with another seed): part-00001.h5 of the
// other one moved into a copy of the first gets past every count and the dataset fingerprint,
// but not the plan fingerprint, and is refused naming the file; the job never trains.
TEST(DistributedCli, TransplantedPartFileIsRefusedByName) {
  ASSERT_EQ(store(2).made.exit_code, 0) << store(2).made.output;
  const fs::path other = work_dir() / "other_seed_store";
  fs::remove_all(other);
  const Result made =
      run(partition_graph("--dataset synth:default --seed 5 --parts 2 --partition "
                          "metis --out " +
                          other.string()));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const fs::path dir = copy_of_store(2, "transplanted_store");
  const fs::path file = dir / tessera::part_file_name(1);
  fs::copy_file(other / tessera::part_file_name(1), file, fs::copy_options::overwrite_existing);
  expect_train_refused(2, "--partitions " + dir.string() + " --epochs 2",
                       {file.string(), "from another partitioning", "plan fingerprint"});
}

TEST(DistributedCli, MissingPartFileIsNamedWithItsRank) {
  const fs::path dir = copy_of_store(2, "incomplete_store");
  const fs::path file = dir / tessera::part_file_name(1);
  fs::remove(file);
  expect_train_refused(2, "--partitions " + dir.string() + " --epochs 2",
                       {file.string(), "rank 1", "no such file"});
}

TEST(DistributedCli, MorePartsThanNodesIsRefused) {
  const fs::path tiny = write_dataset("three_nodes", 3, [](tessera::Dataset&) {});
  expect_train_refused(4, "--dataset " + tiny.string() + " --epochs 2",
                       {"--parts 4", "more parts than the 3 nodes", tiny.string()});
  const fs::path out = work_dir() / "too_many_parts";
  const Result r = run(partition_graph("--parts 5000 --out " + out.string()));
  EXPECT_NE(r.exit_code, 0) << r.output;
  expect_output_has(r, {"--parts 5000", "more parts than the 3000 nodes"});
  EXPECT_FALSE(fs::exists(out));
}

TEST(DistributedCli, PartWithoutTrainingNodesIsNamed) {
  const fs::path dataset = first_half_train_dataset();
  const std::vector<std::string> pieces = {"block", "part 1", "no training node"};
  const fs::path out = work_dir() / "no_train_store";
  const Result r = run(partition_graph("--dataset " + dataset.string() +
                                       " --partition block --parts 2 --out " + out.string()));
  EXPECT_NE(r.exit_code, 0) << r.output;
  expect_output_has(r, pieces);
  EXPECT_FALSE(fs::exists(out));
  expect_train_refused(2, "--dataset " + dataset.string() + " --partition block --epochs 2",
                       pieces);
}

TEST(DistributedCli, PartitionGraphRefusesNonEmptyOutput) {
  const fs::path out = work_dir() / "taken";
  fs::create_directories(out);
  std::ofstream(out / "notes.txt") << "keep me\n";
  std::set<std::string> parent_before = names_in(work_dir());
  const Result r = run(partition_graph("--parts 2 --out " + out.string()));
  EXPECT_NE(r.exit_code, 0) << r.output;
  expect_output_has(r, {out.string(), "not an empty directory"});
  EXPECT_EQ(names_in(out), std::set<std::string>{"notes.txt"});
  EXPECT_EQ(read_text(out / "notes.txt"), "keep me\n");
  std::set<std::string> parent_after = names_in(work_dir());
  parent_after.erase("out.log");  // written by run() itself
  parent_before.erase("out.log");
  EXPECT_EQ(parent_after, parent_before) << "a temporary directory was left behind";
}

// A rank that fails inside the training loop ends the whole job: no rank waits for it.
class FaultInjection : public ::testing::TestWithParam<int> {};

TEST_P(FaultInjection, FailingRankEndsTheJobQuickly) {
  expect_train_refused(GetParam(), "--epochs 50", {"rank 1", "fault injected"},
                       "TESSERA_FAULT_INJECT=1:3", 20.0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, FaultInjection, ::testing::Values(2, 4));

// A rank that stops (TESSERA_STALL) in a set-up step: every other rank gives up after
// --comm-timeout, naming the step, and the job ends — it never waits for the absent rank. Four
// jobs at a time: the stalled rank sleeps and the others wait, so a job is mostly idle.
struct Stall {
  const char* args;   // the mode
  const char* rank;   // the rank that stalls
  const char* phase;  // where
};

TEST(DistributedCli, StalledSetUpEndsTheJobAtTheTimeoutNamingTheStep) {
  const std::vector<Stall> stalls = {
      {"", "1", "creating the communicator"},
      {"", "1", "checking options"},
      {"", "0", "checking options"},
      {"", "1", "checking the launch environment"},
      {"", "1", "loading the dataset"},
      {"", "1", "partitioning"},
      {"", "1", "receiving part 1"},
      {"", "1", "checking the parts against each other"},
      {"", "1", "setting up training"},
      {"", "1", "building the graph operator"},
      {"--codec adaptive", "1", "sharing the receiver weights"},
      {"--parallel pipeline", "1", "laying out the pipeline"},
      {"--parallel pipeline", "0", "starting the parallel mode"},
      {"--parallel pipeline", "1", "checking --parallel"},
      {"--parallel pipeline", "1", "splitting the communicator"},
      {"--parallel pipeline", "1", "loading the graph parts"}};
  constexpr std::size_t kAtOnce = 4;
  for (std::size_t first = 0; first < stalls.size(); first += kAtOnce) {
    std::vector<std::future<RefusedRun>> jobs;
    for (std::size_t i = first; i < std::min(first + kAtOnce, stalls.size()); ++i) {
      const Stall& s = stalls[i];
      jobs.push_back(std::async(std::launch::async, [&s, i] {
        return train_refused(2, std::string(s.args) + " --epochs 2 --comm-timeout 2",
                             "TESSERA_STALL='" + std::string(s.rank) + ":" + s.phase + "'",
                             "stall_" + std::to_string(i));
      }));
    }
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      const Stall& s = stalls[first + j];
      SCOPED_TRACE(std::string("rank ") + s.rank + " stalls at " + s.phase + " " + s.args);
      expect_refused(jobs[j].get(), {"did not complete within 2 s", s.phase}, 20.0);
    }
  }
}

}  // namespace
