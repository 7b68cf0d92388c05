// SPDX-License-Identifier: Apache-2.0
// What train_gcn writes for the steps after training, checked from the outside: predictions and
// embeddings gathered by node id at K ranks equal those of one rank, in either node order (and
// the pipelined modes' match their own metrics); --restore-best reports and saves the best
// validation epoch's weights; a saved model (or a checkpoint) predicts with --predict what
// training predicted, at 1 and 4 ranks; .npy and .csv files are what NumPy reads; and each kind
// of bad output or model input is refused by name, writing nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "datasets/loaders.h"
#include "tests/apps/cli_test_util.h"

namespace {

namespace cli_test = tessera::cli_test;
namespace fs = std::filesystem;
using cli_test::read_text;
using cli_test::Result;

fs::path work_dir() { return cli_test::work_dir("tessera_outputs"); }

Result run(const std::string& command) { return cli_test::run(command, work_dir() / "out.log"); }

std::string train_gcn(int ranks, const std::string& args) {
  return std::string(MPIEXEC_PATH) + " -n " + std::to_string(ranks) + " " + TRAIN_GCN_PATH +
         " --quiet " + args;
}

std::string file(const std::string& name) { return (work_dir() / name).string(); }

// Short runs on synth:default (3000 nodes, 6 classes): the best validation epoch is not the last.
const std::string kTrain = "--epochs 40 --hidden-channels 32 ";

struct Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<float> data;
  const float* row(std::int64_t r) const { return data.data() + r * cols; }
};

// A 2-D float32 .npy file as NumPy writes it (version 1.0, C order), read without NumPy.
Matrix read_npy(const fs::path& path) {
  const std::string bytes = read_text(path);
  Matrix m;
  EXPECT_GE(bytes.size(), 10u) << path;
  if (bytes.size() < 10) return m;
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8)) << path;
  const std::size_t header_len =
      static_cast<unsigned char>(bytes[8]) | static_cast<std::size_t>(bytes[9]) << 8;
  const std::string header = bytes.substr(10, header_len);
  EXPECT_EQ((10 + header_len) % 64, 0u) << "data not 64-byte aligned: " << header;
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
  const std::size_t shape = header.find("'shape': (");
  EXPECT_NE(shape, std::string::npos) << header;
  if (shape == std::string::npos) return m;
  std::sscanf(header.c_str() + shape, "'shape': (%ld, %ld)", &m.rows, &m.cols);
  const std::size_t payload = bytes.size() - 10 - header_len;
  EXPECT_EQ(payload, static_cast<std::size_t>(m.rows * m.cols) * sizeof(float)) << path;
  m.data.resize(payload / sizeof(float));
  std::memcpy(m.data.data(), bytes.data() + 10 + header_len, payload);
  return m;
}

Matrix read_csv(const fs::path& path) {
  std::istringstream text(read_text(path));
  Matrix m;
  std::string line;
  while (std::getline(text, line)) {
    std::istringstream values(line);
    std::string value;
    std::int64_t cols = 0;
    while (std::getline(values, value, ',')) {
      m.data.push_back(std::stof(value));
      ++cols;
    }
    if (m.rows == 0) m.cols = cols;
    EXPECT_EQ(cols, m.cols) << path << " line " << m.rows + 1;
    ++m.rows;
  }
  return m;
}

float max_difference(const Matrix& a, const Matrix& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  if (a.data.size() != b.data.size()) return INFINITY;
  float worst = 0.0f;
  for (std::size_t i = 0; i < a.data.size(); ++i)
    worst = std::max(worst, std::abs(a.data[i] - b.data[i]));
  return worst;
}

std::int64_t argmax(const Matrix& m, std::int64_t r) {
  return std::max_element(m.row(r), m.row(r) + m.cols) - m.row(r);
}

std::int64_t argmax_differences(const Matrix& a, const Matrix& b) {
  std::int64_t differ = 0;
  for (std::int64_t r = 0; r < std::min(a.rows, b.rows); ++r)
    differ += argmax(a, r) != argmax(b, r);
  return differ;
}

// Test accuracy of the predicted classes against synth:default's labels.
double test_accuracy(const Matrix& probabilities) {
  static const tessera::Dataset data = tessera::load_dataset("synth:default");
  std::int64_t correct = 0;
  for (const tessera::GlobalId id : data.test_idx)
    correct += argmax(probabilities, id) == data.labels[static_cast<std::size_t>(id)];
  return static_cast<double>(correct) / static_cast<double>(data.test_idx.size());
}

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(read_text(path)); }

// One training at 1 rank with every output, shared by the tests that compare against it.
struct Reference {
  Result result;
  fs::path predictions = file("ref_predictions.npy");
  fs::path best_predictions = file("ref_best_predictions.npy");
  fs::path embeddings = file("ref_embeddings.csv");
  fs::path model = file("ref_model.h5");
  fs::path summary = file("ref_summary.json");
  fs::path checkpoints = file("ref_checkpoints");
};
const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    r.result = run(train_gcn(1, kTrain + "--save-predictions " + r.predictions.string() +
                                    " --save-embeddings " + r.embeddings.string() +
                                    " --embedding-layer 1 --save-model " + r.model.string() +
                                    " --summary " + r.summary.string() + " --checkpoint-dir " +
                                    r.checkpoints.string() + " --checkpoint-every 40"));
    return r;
  }();
  EXPECT_EQ(ref.result.exit_code, 0) << ref.result.output;
  return ref;
}

TEST(Outputs, PredictionsAreProbabilitiesOfEveryNodeInIdOrder) {
  const Reference& ref = reference();
  const Matrix p = read_npy(ref.predictions);
  ASSERT_EQ(p.rows, 3000);
  ASSERT_EQ(p.cols, 6);
  for (std::int64_t r = 0; r < p.rows; ++r) {
    double sum = 0.0;
    for (std::int64_t c = 0; c < p.cols; ++c) {
      ASSERT_GE(p.row(r)[c], 0.0f);
      sum += p.row(r)[c];
    }
    ASSERT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
  // In node-id order: the predicted classes score the last epoch's test accuracy.
  const nlohmann::json summary = read_json(ref.summary);
  EXPECT_NEAR(test_accuracy(p), summary.at("last_test").get<double>(), 1e-12);
}

// Training at 4 ranks sums in another order than at 1: the probabilities agree to rounding
// carried through 40 epochs, and so do the classes, up to a node whose two top classes are that
// close (none measured; 3 of 3000 allowed). The same weights at 4 ranks give the
// same classes exactly: SavedModelPredictsWhatTrainingPredictedAtOneAndFourRanks.
TEST(Outputs, PredictionsAtFourRanksEqualThoseAtOneRank) {
  const Reference& ref = reference();
  const fs::path four = file("predictions_4.npy");
  const Result r = run(train_gcn(4, kTrain + "--save-predictions " + four.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Matrix a = read_npy(ref.predictions), b = read_npy(four);
  EXPECT_LE(max_difference(a, b), 1e-2f);
  EXPECT_LE(argmax_differences(a, b), 3);
}

std::vector<double> losses(const fs::path& metrics) {
  std::vector<double> out;
  std::istringstream lines(read_text(metrics));
  for (std::string line; std::getline(lines, line);)
    out.push_back(nlohmann::json::parse(line).at("loss").get<double>());
  return out;
}

// Renumbering the nodes for locality (--node-order rcm, the default) is invisible: without
// dropout (whose masks are keyed by the renumbered ids) the losses equal those of the dataset's
// order up to summation order, and the predictions and embeddings, written by the dataset's
// ids, agree row for row; the summary records the order the parts had (a store's, too).
TEST(Outputs, NodeOrderChangesNeitherTheNumbersNorTheIdsOfOutputs) {
  const std::string args = "--epochs 8 --hidden-channels 32 --dropout 0 --embedding-layer 0 ";
  const fs::path store = work_dir() / "rcm_store";
  fs::remove_all(store);
  const Result made = run(std::string(PARTITION_GRAPH_PATH) +
                          " --quiet --dataset synth:default --parts 2 --out " + store.string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  struct Case {
    std::string name;
    int ranks;
    std::string flags;
    std::string order;
  };
  const std::vector<Case> cases = {{"none_1", 1, "--node-order none", "none"},
                                   {"rcm_1", 1, "", "rcm"},
                                   {"rcm_2", 2, "--node-order rcm", "rcm"},
                                   {"none_2", 2, "--node-order none", "none"},
                                   {"store_2", 2, "--partitions " + store.string(), "rcm"}};
  std::vector<std::vector<double>> loss;
  std::vector<Matrix> predictions, embeddings;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path p = file("order_" + c.name + ".npy"), e = file("order_emb_" + c.name + ".npy");
    const fs::path m = file("order_" + c.name + ".jsonl"), s = file("order_" + c.name + ".json");
    const Result r = run(train_gcn(c.ranks, args + c.flags + " --save-predictions " + p.string() +
                                                " --save-embeddings " + e.string() + " --metrics " +
                                                m.string() + " --summary " + s.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json summary = read_json(s);
    EXPECT_EQ(summary.at("node_order"), c.order);
    // Renumbered here (not read from a store): the time it took is reported.
    const bool renumbered_here = c.order == "rcm" && c.name != "store_2";
    EXPECT_EQ(summary.at("node_order_s").get<double>() > 0.0, renumbered_here);
    loss.push_back(losses(m));
    predictions.push_back(read_npy(p));
    embeddings.push_back(read_npy(e));
  }
  for (std::size_t i = 1; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name + " against " + cases[0].name);
    ASSERT_EQ(loss[i].size(), loss[0].size());
    for (std::size_t epoch = 0; epoch < loss[0].size(); ++epoch)
      EXPECT_NEAR(loss[i][epoch], loss[0][epoch], 1e-5 * loss[0][epoch]) << "epoch " << epoch;
    EXPECT_LE(max_difference(predictions[i], predictions[0]), 1e-4f);
    EXPECT_EQ(argmax_differences(predictions[i], predictions[0]), 0);
    EXPECT_LE(max_difference(embeddings[i], embeddings[0]), 1e-3f);
  }
}

// The pipelined modes train another model (chunks see stale halos), so their predictions are
// checked against their own summary: the file's classes, in node-id order, score its accuracy.
// The pipelined modes: predictions are the last stage's rows gathered by node id, and the model
// file is the whole model gathered from the stages by parameter name, so --predict at 1 rank
// (graph mode) predicts what the pipeline's exact evaluation did.
TEST(Outputs, PipelinedModesGatherTheLastStagesRowsAndTheWholeModel) {
  for (const auto& [ranks, mode] : {std::pair{2, "pipeline"}, std::pair{4, "hybrid"}}) {
    const fs::path out = file(std::string("predictions_") + mode + ".npy");
    const fs::path summary = file(std::string("summary_") + mode + ".json");
    const fs::path model = file(std::string("model_") + mode + ".h5");
    const Result r =
        run(train_gcn(ranks, kTrain + "--parallel " + mode + " --stages 2" +
                                 " --save-predictions " + out.string() + " --summary " +
                                 summary.string() + " --save-model " + model.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const Matrix p = read_npy(out);
    ASSERT_EQ(p.rows, 3000) << mode;
    EXPECT_NEAR(test_accuracy(p), read_json(summary).at("last_test").get<double>(), 1e-12) << mode;
    const fs::path again = file(std::string("predicted_") + mode + ".npy");
    const Result predicted =
        run(train_gcn(1, "--predict " + model.string() + " --save-predictions " + again.string()));
    ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
    const Matrix q = read_npy(again);
    EXPECT_LE(max_difference(p, q), 1e-5f) << mode << ": one evaluation's rounding";
    EXPECT_EQ(argmax_differences(p, q), 0) << mode;
  }
}

// The same weights (the reference's model file) at 2 ranks: the gathered embeddings equal the
// 1-rank ones to one evaluation's rounding.
TEST(Outputs, EmbeddingsAtTwoRanksEqualThoseAtOneRankAsCsv) {
  const Reference& ref = reference();
  const fs::path two = file("embeddings_2.csv");
  const Result r = run(train_gcn(2, "--predict " + ref.model.string() + " --save-embeddings " +
                                        two.string() + " --embedding-layer 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Matrix a = read_csv(ref.embeddings), b = read_csv(two);
  EXPECT_EQ(a.rows, 3000);
  EXPECT_EQ(a.cols, 32);  // the hidden width
  float scale = 0.0f;
  for (float v : a.data) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0.0f);
  EXPECT_LE(max_difference(a, b), 1e-5f * scale);
}

TEST(Outputs, RestoreBestReportsAndSavesTheBestValidationEpoch) {
  const fs::path best = file("best_predictions.npy"), summary = file("best_summary.json");
  const Result r = run(train_gcn(1, kTrain + "--restore-best --save-predictions " + best.string() +
                                        " --summary " + summary.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json s = read_json(summary);
  // The guard: the best epoch is not the last, so the two kinds of weights predict differently.
  ASSERT_NE(s.at("final_test").get<double>(), s.at("last_test").get<double>());
  EXPECT_NEAR(test_accuracy(read_npy(best)), s.at("final_test").get<double>(), 1e-12);
  // Without it, the last epoch's weights (the reference run).
  EXPECT_NE(max_difference(read_npy(best), read_npy(reference().predictions)), 0.0f);
}

TEST(Outputs, SavedModelPredictsWhatTrainingPredictedAtOneAndFourRanks) {
  const Reference& ref = reference();
  const Matrix trained = read_npy(ref.predictions);
  for (int ranks : {1, 4}) {
    const fs::path out = file("predicted_" + std::to_string(ranks) + ".npy");
    // The model file's options define the model: a different --num-layers given is overridden.
    const Result r =
        run(train_gcn(ranks, "--predict " + ref.model.string() +
                                 " --num-layers 5 --save-predictions " + out.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const Matrix predicted = read_npy(out);
    if (ranks == 1) {
      EXPECT_EQ(max_difference(trained, predicted), 0.0f) << "1 rank: the same bits";
    } else {
      EXPECT_LE(max_difference(trained, predicted), 1e-5f) << "one evaluation's rounding";
      EXPECT_EQ(argmax_differences(trained, predicted), 0);
    }
  }
}

TEST(Outputs, PredictFromACheckpointPrintsItsMetrics) {
  const Reference& ref = reference();
  const fs::path out = file("from_checkpoint.npy");
  const fs::path checkpoint = ref.checkpoints / "checkpoint-r0000-e0000040.h5";
  ASSERT_TRUE(fs::exists(checkpoint)) << ref.result.output;
  // Without --quiet: the metrics line.
  const Result r = run(std::string(TRAIN_GCN_PATH) + " --predict " + checkpoint.string() +
                       " --save-predictions " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(max_difference(read_npy(ref.predictions), read_npy(out)), 0.0f);
  const nlohmann::json s = read_json(ref.summary);
  char line[128];
  std::snprintf(line, sizeof line, "Valid: %.2f%%, Test: %.2f%%",
                100.0 * s.at("last_valid").get<double>(), 100.0 * s.at("last_test").get<double>());
  EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
}

TEST(Outputs, BadOutputAndModelInputIsRefusedByNameWritingNothing) {
  const Reference& ref = reference();
  const fs::path dir = work_dir() / "bad";
  fs::create_directories(dir);
  const fs::path text = dir / "not_a_model.h5";
  std::ofstream(text) << "not HDF5\n";
  const std::string shared = TESSERA_SHARED_DATASETS;
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"--save-predictions " + (dir / "p.txt").string(), "--save-predictions"},
      {"--save-embeddings " + (dir / "e.json").string(), "ending in .npy or .csv"},
      {"--save-predictions " + (dir / "missing_dir" / "p.npy").string(), "missing_dir"},
      {"--embedding-layer 3 --save-embeddings " + (dir / "e.npy").string(), "--embedding-layer"},
      {"--parallel pipeline --save-embeddings " + (dir / "e.npy").string(), "--save-embeddings"},
      {"--predict " + (dir / "absent.h5").string(), "absent.h5"},
      {"--predict " + text.string(), "not_a_model.h5"},
      {"--predict " + ref.summary.string(), "ref_summary.json"},
      {"--predict " + ref.model.string() + " --summary " + (dir / "s.json").string(), "--summary"},
      {"--summary " + dir.string(), "is a folder"},
      {"--save-predictions " + (dir / "p.npy").string() + " --save-embeddings " + dir.string() +
           "/./p.npy",
       "the same file as --save-predictions"},
      {"--metrics " + (dir / "run.json").string() + " --summary " + (dir / "run.json").string(),
       "the same file as --metrics"},
  };
  for (int ranks : {1, 2}) {
    for (const Case& c : cases) {
      const Result r = run(train_gcn(ranks, "--epochs 2 " + c.args));
      EXPECT_NE(r.exit_code, 0) << r.output;
      EXPECT_LT(r.exit_code, 128) << r.output;
      EXPECT_NE(r.output.find(c.message), std::string::npos) << c.message << "\n" << r.output;
      EXPECT_LT(r.seconds, 60.0) << r.output;
    }
  }
  // Nothing written, not even a temporary file.
  std::vector<std::string> left;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.path() != text) left.push_back(entry.path().string());
  EXPECT_TRUE(left.empty()) << left.front();
  // A model of other features: the sizes are named.
  const fs::path cora = fs::path(shared) / "cora";
  if (fs::exists(cora)) {
    const Result r =
        run(train_gcn(1, "--dataset " + cora.string() + " --predict " + ref.model.string() +
                             " --save-predictions " + (dir / "cora.npy").string()));
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("parameters"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir / "cora.npy"));
  }
}

// A run that fails after training, while its outputs are written (on rank 0 or on another rank),
// or during training on any rank (another rank's failure inside a step reaches rank 0 as an
// abort notice, comm/abort_notice.h), leaves none of its output files: not the predictions,
// embeddings or model already renamed into place, not the summary, not the streamed metrics.
TEST(Outputs, AFailedRunLeavesNoOutputFile) {
  const fs::path dir = work_dir() / "failed";
  // Pipeline mode writes no embeddings.
  const auto outputs = [&](bool embeddings = true) {
    return " --metrics " + (dir / "m.jsonl").string() + " --summary " + (dir / "s.json").string() +
           " --save-predictions " + (dir / "p.npy").string() +
           (embeddings ? " --save-embeddings " + (dir / "e.csv").string() : "") + " --save-model " +
           (dir / "model.h5").string();
  };
  struct Case {
    int ranks;
    std::string fault;
    std::string mode = "";
  };
  const std::string pipeline = " --parallel pipeline --num-layers 4";
  for (const Case& c : {Case{1, "0:1:outputs"}, Case{2, "0:1:outputs"}, Case{2, "1:1:outputs"},
                        Case{1, "0:2:throw"}, Case{2, "0:2:throw"}, Case{2, "1:2:throw"},
                        Case{4, "3:2:throw"}, Case{2, "1:2:throw", pipeline}}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const Result r = run("env TESSERA_FAULT_INJECT=" + c.fault + " " +
                         train_gcn(c.ranks, "--epochs 3" + c.mode + outputs(c.mode.empty())));
    EXPECT_NE(r.exit_code, 0) << c.fault << "\n" << r.output;
    EXPECT_NE(r.output.find("fault injected"), std::string::npos) << r.output;
    std::vector<std::string> left;
    for (const auto& entry : fs::directory_iterator(dir)) left.push_back(entry.path().string());
    EXPECT_TRUE(left.empty()) << c.ranks << " ranks" << c.mode << ", " << c.fault << ": "
                              << left.front();
  }
  // The same run without the fault writes every one of them.
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Result r = run(train_gcn(2, "--epochs 3" + outputs()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"m.jsonl", "s.json", "p.npy", "e.csv", "model.h5"})
    EXPECT_TRUE(fs::exists(dir / name)) << name;
}

}  // namespace
