// SPDX-License-Identifier: Apache-2.0
// The pre-flight planner (engine/planner.h): the part shapes it computes from a plan equal those
// of the parts PartBuilder makes (and part_shape reads back); its bytes per epoch equal what a
// K-rank training run sends (exact without a codec, within the message headers with int8); the
// step it measures grows with the model's width and counts the bf16 workspace and the sums kept
// in bf16; the configuration asked for is the plan's first row whatever its mode. (Its memory
// against measured runs: bench/plan_validation.py.)
#include <gtest/gtest.h>
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "comm/mpi_communicator.h"
#include "core/error.h"
#include "datasets/loaders.h"
#include "datasets/synthetic.h"
#include "engine/planner.h"
#include "engine/trainer.h"
#include "partition/graph_part.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

struct Data {
  Dataset dataset;
  Csr graph;
  DatasetInfo info;
};

const Data& data() {
  static const Data d = [] {
    SyntheticConfig c = synthetic_preset("default");
    c.num_nodes = 1200;
    c.num_edges = 6000;
    c.num_features = 24;
    Data out;
    out.dataset = generate_synthetic(c);
    out.graph = training_graph(out.dataset);
    out.info = dataset_info(out.dataset);
    return out;
  }();
  return d;
}

TrainConfig small_config(const std::string& model, const std::string& codec) {
  TrainConfig c;
  c.model = model;
  c.num_layers = 3;
  c.hidden_channels = 32;
  c.heads = 2;
  c.epochs = 2;
  c.eval_every = 1;
  c.verbosity = 0;
  c.handle_signals = false;
  c.codec = codec;
  return c;
}

int ranks() {
  int k = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &k);
  return k;
}

TEST(Planner, PartShapesAreThoseOfTheBuiltParts) {
  const Data& d = data();
  for (const int k : {1, 2, 3, 4}) {
    const PartitionPlan plan =
        make_partition(PartitionMethod::Metis, d.graph, d.dataset.train_idx, k, 0);
    const std::vector<PartShape> shapes = part_shapes(d.graph, plan, d.dataset.train_idx);
    ASSERT_EQ(shapes.size(), static_cast<std::size_t>(k));
    for (int p = 0; p < k; ++p) {
      const PartShape built = part_shape(PartBuilder(d.dataset, d.graph, plan, d.info).build(p));
      const PartShape& s = shapes[static_cast<std::size_t>(p)];
      const std::string at = std::to_string(k) + " parts, part " + std::to_string(p);
      EXPECT_EQ(s.owned, built.owned) << at;
      EXPECT_EQ(s.halo, built.halo) << at;
      EXPECT_EQ(s.entries, built.entries) << at;
      EXPECT_EQ(s.halo_entries, built.halo_entries) << at;
      EXPECT_EQ(s.send, built.send) << at;
      EXPECT_EQ(s.boundary, built.boundary) << at;
      EXPECT_EQ(s.train, built.train) << at;
    }
  }
}

TEST(Planner, StepMemoryGrowsWithTheWidth) {
  const Data& d = data();
  const StepMemory narrow = measure_step_memory(small_config("gcn", "none"), d.info, 10.0, 2048);
  TrainConfig wide_config = small_config("gcn", "none");
  wide_config.hidden_channels = 256;
  const StepMemory wide = measure_step_memory(wide_config, d.info, 10.0, 2048);
  // Every hidden layer keeps at least its output and one gradient (N x hidden floats each).
  EXPECT_GE(wide.per_row, 2.0 * 4.0 * 256.0 * 2.0);
  EXPECT_GT(wide.per_row, 4.0 * narrow.per_row);
  const std::int64_t c = d.info.num_classes;
  EXPECT_EQ(wide.parameters, 24 * 256 + 256 + 256 * 256 + 256 + 256 * c + c);
}

// bf16 aggregation: the layers that aggregate first (24 -> 256, 256 -> 256) keep P X in bf16,
// which saves 2 bytes a value of theirs, 560 a row, and round their own inputs into it; what the
// propagator still rounds into a workspace of its own is the last layer's (N, C) rows (it
// transforms first). The measured step counts both. A workspace at the hidden width, as before
// the layers rounded their inputs (2 x 256 bytes a row; the step was then 96 bytes a row under
// f32's), fails the first bound.
TEST(Planner, StepMemoryCountsTheBf16WorkspaceAndKeptSums) {
  const Data& d = data();
  TrainConfig f32 = small_config("gcn", "none");
  f32.hidden_channels = 256;
  TrainConfig bf16 = f32;
  bf16.aggregate_dtype = "bf16";
  const StepMemory exact = measure_step_memory(f32, d.info, 10.0, 2048);
  const StepMemory rounded = measure_step_memory(bf16, d.info, 10.0, 2048);
  const double kept = -2.0 * (24.0 + 256.0);
  const double workspace = 2.0 * static_cast<double>(d.info.num_classes);
  EXPECT_LT(rounded.per_row - exact.per_row, kept + workspace + 64.0);
  EXPECT_GT(rounded.per_row - exact.per_row, kept - 16.0);
}

// The plan's bytes per epoch against a real run on this job's ranks.
TEST(Planner, BytesPerEpochAreThoseOfTraining) {
  const Data& d = data();
  MpiCommunicator comm{MPI_COMM_WORLD, 120.0};
  const int k = ranks();
  const PartitionPlan plan =
      make_partition(PartitionMethod::Metis, d.graph, d.dataset.train_idx, k, 0);
  for (const char* model : {"gcn", "sage", "gat"}) {
    for (const char* codec : {"none", "int8"}) {
      const TrainConfig config = small_config(model, codec);
      PlanInputs in;
      in.config = config;
      in.data = d.info;
      in.entries = d.graph.nnz();
      in.parts = part_shapes(d.graph, plan, d.dataset.train_idx);
      in.source = k == 1 ? PartSourceKind::Single : PartSourceKind::InProcess;
      in.step =
          measure_step_memory(config, d.info, static_cast<double>(d.graph.nnz()) / 1200.0, 512);
      in.ranks = k;
      const PlanEstimate e = estimate_plan(in);
      Trainer trainer(config, PartBuilder(d.dataset, d.graph, plan, d.info).build(comm.rank()),
                      comm);
      const RunResult r = trainer.train_run(0);
      const auto sent = [&](TrafficCategory c) {
        return static_cast<double>(r.bytes_per_epoch[static_cast<int>(c)]);
      };
      const std::string at =
          std::string(model) + ", " + codec + ", " + std::to_string(k) + " ranks";
      // int8: the model counts the rows' bytes, not the 16-byte message headers.
      const double tolerance = std::string(codec) == "none" ? 0.0 : 0.05;
      EXPECT_NEAR(e.halo_forward, sent(TrafficCategory::HaloForward),
                  tolerance * e.halo_forward + 0.5)
          << at;
      EXPECT_NEAR(e.halo_backward, sent(TrafficCategory::HaloBackward),
                  tolerance * e.halo_backward + 0.5)
          << at;
      EXPECT_NEAR(e.all_reduce, sent(TrafficCategory::AllReduce), 0.5) << at;
      EXPECT_EQ(e.pipeline, 0.0) << at;
      ASSERT_EQ(e.memory.size(), static_cast<std::size_t>(k)) << at;
    }
  }
}

// Where a rank's rows come from decides its load phase: read in slices of an HDF5 file, each
// rank holds its rows as read and the part built from them, and rank 0 no whole dataset. Without
// a codec the halo rows travel raw (no encoded messages); a codec adds its messages at the
// widest exchange and the decoded rows.
TEST(Planner, LoadAndExchangeFollowTheSourceAndTheCodec) {
  if (ranks() > 1) GTEST_SKIP() << "one process plans";
  const Data& d = data();
  const int k = 4;
  const PartitionPlan plan = partition_block(d.info.num_nodes, k);
  PlanInputs in;
  in.config = small_config("gcn", "none");
  in.config.dataset = "data.h5";
  in.data = d.info;
  in.entries = d.graph.nnz();
  in.parts = part_shapes(d.graph, plan, d.dataset.train_idx);
  in.facts.baseline = 100u << 20;
  in.facts.load_peak = in.facts.dataset = 50u << 20;  // a whole dataset far above a part
  in.step = {.per_row = 1000.0, .fixed = 4096.0, .parameters = 2000};
  in.ranks = k;
  in.source = PartSourceKind::Sliced;
  const PlanEstimate sliced = estimate_plan(in);
  in.source = PartSourceKind::InProcess;
  const PlanEstimate in_process = estimate_plan(in);
  ASSERT_EQ(sliced.memory.size(), static_cast<std::size_t>(k));
  for (int r = 0; r < k; ++r) {
    const double own = part_data_bytes(in.parts[static_cast<std::size_t>(r)], d.info);
    EXPECT_NEAR(static_cast<double>(sliced.memory[static_cast<std::size_t>(r)].load),
                static_cast<double>(in.facts.baseline) + 2.0 * own, 1.0)
        << "rank " << r;
    EXPECT_EQ(sliced.memory[static_cast<std::size_t>(r)].train,
              in_process.memory[static_cast<std::size_t>(r)].train);
  }
  EXPECT_GT(in_process.memory[0].load, sliced.memory[0].load + (40u << 20));

  in.config.codec = "bf16";  // both directions
  const PlanEstimate coded = estimate_plan(in);
  const double width = 32.0;  // the widest exchange: the hidden layers
  for (int r = 0; r < k; ++r) {
    const PartShape& p = in.parts[static_cast<std::size_t>(r)];
    const double h = static_cast<double>(p.halo), s = static_cast<double>(p.send);
    const double extra = static_cast<double>(coded.memory[static_cast<std::size_t>(r)].train) -
                         static_cast<double>(in_process.memory[static_cast<std::size_t>(r)].train);
    // bf16 messages (2 bytes a value, both ways), and the decoded halo rows (4 bytes a value).
    EXPECT_GE(extra, 2.0 * width * (h + s) + 4.0 * width * h) << "rank " << r;
    EXPECT_LE(extra, 2.0 * width * (h + s) + 4.0 * width * h + 8192.0) << "rank " << r;
  }
}

// --feature-dtype bf16: a part loads its features in f32 and trains with them in bf16, half their
// bytes; while graph mode rounds them it holds both, which is the peak when the step is small
// beside the features (1,000 of them here).
TEST(Planner, Bf16FeaturesAreCountedAsTheyAreKept) {
  if (ranks() > 1) GTEST_SKIP() << "one process plans";
  const Data& d = data();
  const int k = 2;
  PlanInputs in;
  in.config = small_config("gcn", "none");
  in.data = d.info;
  in.data.num_features = 1000;
  in.entries = d.graph.nnz();
  in.parts = part_shapes(d.graph, partition_block(d.info.num_nodes, k), d.dataset.train_idx);
  in.facts.baseline = 100u << 20;
  in.facts.load_peak = in.facts.dataset = 1u << 20;
  in.ranks = k;
  in.source = PartSourceKind::InProcess;
  for (const double per_row : {40000.0, 0.0}) {
    in.step = {.per_row = per_row, .fixed = 0.0, .parameters = 2000};
    in.config.feature_dtype = "f32";
    const PlanEstimate f32 = estimate_plan(in);
    in.config.feature_dtype = "bf16";
    const PlanEstimate bf16 = estimate_plan(in);
    for (int r = 0; r < k; ++r) {
      const auto i = static_cast<std::size_t>(r);
      const double features = 2.0 * static_cast<double>(in.parts[i].owned * in.data.num_features);
      EXPECT_EQ(bf16.memory[i].load, f32.memory[i].load) << "rank " << r;
      if (per_row > 0.0) {  // the step is the peak: the bf16 features save half their bytes
        EXPECT_NEAR(
            static_cast<double>(f32.memory[i].train) - static_cast<double>(bf16.memory[i].train),
            features, 128.0)
            << "rank " << r;
      } else {  // the rounding is: the f32 part, the operator and halo buffers and the bf16
                // features at once (with no step, f32 training holds the first two)
        EXPECT_NEAR(
            static_cast<double>(bf16.memory[i].train) - static_cast<double>(f32.memory[i].train),
            features, 128.0)
            << "rank " << r;
      }
    }
  }
}

// Graph mode's memory check (graph_mode.cc) measures a step only for a part whose floor is above
// an eighth of the budget: on a large part the floor is below the estimate, and the estimate
// within eight times the floor, for every layer kind, with batch norm and with bf16 features.
TEST(Planner, GraphRankFloorBoundsTheEstimate) {
  if (ranks() > 1) GTEST_SKIP() << "one process plans";
  const Data& d = data();
  PartShape big =
      part_shapes(d.graph, partition_block(d.info.num_nodes, 2), d.dataset.train_idx)[0];
  for (std::int64_t* n : {&big.owned, &big.halo, &big.entries, &big.halo_entries, &big.send,
                          &big.boundary, &big.train})
    *n *= 1000;
  const double mean_degree =
      static_cast<double>(d.graph.nnz()) / static_cast<double>(d.info.num_nodes);
  for (const std::string variant :
       {"gcn", "sage", "gat", "gcnii", "resgcn", "gcn batch-norm", "sage bf16-features"}) {
    TrainConfig c = small_config(variant.substr(0, variant.find(' ')), "none");
    c.hidden_channels = 256;
    c.batch_norm = variant.ends_with("batch-norm");
    if (variant.ends_with("bf16-features")) c.feature_dtype = "bf16";
    const StepMemory step = measure_step_memory(c, d.info, mean_degree, 512);  // quick (ASan)
    const double estimate = graph_rank_bytes(c, d.info, big, step);
    const double floor = graph_rank_floor_bytes(c, d.info, big);
    EXPECT_LE(floor, estimate) << variant;
    EXPECT_LE(estimate, 8.0 * floor) << variant;
    std::printf("[ measured ] %s: floor %.0f MB, estimate %.0f MB (%.2fx)\n", variant.c_str(),
                floor / 1e6, estimate / 1e6, estimate / floor);
  }
}

// A GPU keeps what the host's step reduces to signs: a 3-layer GCN's first hidden output (layer 1
// aggregates first), 4 bytes a value instead of a bit; SAGE, whose backward reads every input,
// and GCN with batch norm keep theirs on the host too, so their GPU holds the host's tensors.
TEST(Planner, AGpuKeepsTheOutputsTheHostKeepsAsSigns) {
  if (ranks() > 1) GTEST_SKIP() << "one process plans";
  const Data& d = data();
  const int k = 2;
  PlanInputs in;
  in.data = d.info;
  in.entries = d.graph.nnz();
  in.parts = part_shapes(d.graph, partition_block(d.info.num_nodes, k), d.dataset.train_idx);
  in.facts.baseline = 100u << 20;
  in.step = {.per_row = 1000.0, .fixed = 4096.0, .parameters = 2000};
  in.ranks = k;
  in.source = PartSourceKind::Store;
  struct Case {
    const char* model;
    bool batch_norm;
    double gap;  // bytes a row the GPU keeps beyond the host
  };
  for (const Case& c :
       {Case{"gcn", false, 32 * 4 - 32 / 8}, Case{"sage", false, 0.0}, Case{"gcn", true, 0.0}}) {
    in.config = small_config(c.model, "none");
    in.config.batch_norm = c.batch_norm;
    const PlanEstimate e = estimate_plan(in);
    for (int r = 0; r < k; ++r) {
      const RankMemory& m = e.memory[static_cast<std::size_t>(r)];
      const double owned = static_cast<double>(in.parts[static_cast<std::size_t>(r)].owned);
      EXPECT_NEAR(static_cast<double>(m.device),
                  static_cast<double>(m.train - in.facts.baseline) + c.gap * owned, 1.0)
          << c.model << (c.batch_norm ? " with batch norm" : "") << ", rank " << r;
    }
  }
}

// A directed version of data()'s graph with self loops: u -> v for u < v, the reverse for every
// third pair, and a loop on every seventh node.
Dataset directed_dataset() {
  Dataset d = generate_synthetic([] {
    SyntheticConfig c = synthetic_preset("default");
    c.num_nodes = 900;
    c.num_edges = 5000;
    c.num_features = 5;
    return c;
  }());
  std::vector<EdgeOffset> indptr = {0};
  std::vector<NodeId> indices;
  for (std::int64_t v = 0; v < d.num_nodes(); ++v) {
    std::vector<NodeId> row;
    for (EdgeOffset e = d.graph.indptr()[v]; e < d.graph.indptr()[v + 1]; ++e) {
      const NodeId u = d.graph.indices()[e];
      if (u != v && (u < v || (u + v) % 3 == 0)) row.push_back(u);
    }
    if (v % 7 == 0) row.push_back(static_cast<NodeId>(v));
    std::sort(row.begin(), row.end());
    indices.insert(indices.end(), row.begin(), row.end());
    indptr.push_back(static_cast<EdgeOffset>(indices.size()));
  }
  d.graph = Csr(d.num_nodes(), d.num_nodes(), std::move(indptr), std::move(indices));
  return d;
}

void expect_same_shapes(const std::vector<PartShape>& got, const std::vector<PartShape>& want,
                        bool entries, const std::string& at) {
  ASSERT_EQ(got.size(), want.size()) << at;
  for (std::size_t p = 0; p < got.size(); ++p) {
    EXPECT_EQ(got[p].owned, want[p].owned) << at << ", part " << p;
    EXPECT_EQ(got[p].halo, want[p].halo) << at << ", part " << p;
    EXPECT_EQ(got[p].send, want[p].send) << at << ", part " << p;
    EXPECT_EQ(got[p].boundary, want[p].boundary) << at << ", part " << p;
    EXPECT_EQ(got[p].train, want[p].train) << at << ", part " << p;
    if (!entries) continue;
    EXPECT_EQ(got[p].entries, want[p].entries) << at << ", part " << p;
    EXPECT_EQ(got[p].halo_entries, want[p].halo_entries) << at << ", part " << p;
  }
}

// Streamed from the file, the block parts' shapes are those of the loaded training graph: all
// of them exactly when every entry is looked up (symmetric and directed graphs, self loops),
// and everything but the entries exactly when a sample is drawn, the entries within a few
// percent. A plan of block parts on an HDF5 file streams them, and its rows are those of graph
// mode on 2 ranks or more.
TEST(Planner, BlockPartsStreamedFromTheFileAreThoseOfTheLoadedGraph) {
  if (ranks() > 1) GTEST_SKIP() << "one process plans";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessera_plan_stream_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const Data& symmetric = data();
  const Dataset directed = directed_dataset();
  for (const Dataset* d : {&symmetric.dataset, &directed}) {
    const bool is_directed = d == &directed;
    const std::filesystem::path file = dir / (is_directed ? "directed.h5" : "symmetric.h5");
    write_hdf5(*d, file);
    Hdf5GraphReader reader(file);
    const Csr graph = training_graph(*d);
    for (const int k : {2, 3, 5}) {
      const std::string at =
          std::string(is_directed ? "directed" : "symmetric") + ", " + std::to_string(k) + " parts";
      const std::vector<PartShape> want =
          part_shapes(graph, partition_block(d->num_nodes(), k), d->train_idx);
      const StreamedShapes all = block_shapes_from_file(reader, k, d->graph.nnz(), 7);
      EXPECT_TRUE(all.exact) << at;
      expect_same_shapes(all.parts, want, true, at);
      const StreamedShapes drawn = block_shapes_from_file(reader, k, 300, 7);
      EXPECT_FALSE(drawn.exact) << at;
      EXPECT_LE(drawn.sampled, k * 300) << at;  // the draws that were not self loops
      EXPECT_GT(drawn.sampled, k * 250) << at;
      expect_same_shapes(drawn.parts, want, !is_directed, at);
      for (std::size_t p = 0; p < want.size(); ++p) {
        EXPECT_NEAR(static_cast<double>(drawn.parts[p].entries),
                    static_cast<double>(want[p].entries),
                    0.08 * static_cast<double>(want[p].entries))
            << at << ", part " << p;
        EXPECT_NEAR(static_cast<double>(drawn.parts[p].halo_entries),
                    static_cast<double>(want[p].halo_entries),
                    0.08 * static_cast<double>(want[p].halo_entries))
            << at << ", part " << p;
      }
    }
  }
  // The plan: streamed, no row below 2 ranks, the configuration's parts as above.
  TrainConfig config = small_config("gcn", "none");
  config.dataset = (dir / "directed.h5").string();
  config.partition = "block";
  const std::vector<int> plan_ranks = {3, 1, 2};
  const PlanReport r = make_plan(config, plan_ranks, /*progress=*/false);
  EXPECT_TRUE(r.streamed);
  EXPECT_EQ(r.data.num_nodes, directed.num_nodes());
  EXPECT_EQ(r.data.num_features, 5);
  ASSERT_FALSE(r.rows.empty());
  for (const PlanEstimate& e : r.rows) {
    EXPECT_EQ(e.mode, "graph");
    EXPECT_GE(e.ranks, 2);
  }
  EXPECT_EQ(r.rows.front().ranks, 3);
  expect_same_shapes(r.parts,
                     part_shapes(training_graph(directed), partition_block(directed.num_nodes(), 3),
                                 directed.train_idx),
                     true, "the plan's");
  std::filesystem::remove_all(dir);
}

// A plan for GPUs offers the pipelined modes as a CPU plan does (they train on GPUs too), each
// rank with the memory its GPU would hold.
TEST(Planner, GpuPlansOfferThePipelinedModes) {
  if (ranks() > 1) GTEST_SKIP() << "one process plans";
  TrainConfig config = small_config("gcn", "none");
  config.dataset = "synth:default";
  config.num_layers = 4;
  const std::vector<int> plan_ranks = {4};
  for (const bool gpu : {false, true}) {
    const PlanReport r = make_plan(config, plan_ranks, /*progress=*/false, gpu);
    EXPECT_EQ(r.gpu, gpu);
    for (const char* mode : {"pipeline", "hybrid"}) {
      const auto row = std::find_if(r.rows.begin(), r.rows.end(),
                                    [&](const PlanEstimate& e) { return e.mode == mode; });
      ASSERT_NE(row, r.rows.end()) << mode << (gpu ? " on GPUs" : " on CPUs");
      ASSERT_EQ(row->memory.size(), 4u);
      for (const RankMemory& m : row->memory) EXPECT_GT(m.device, 0u) << mode;
    }
  }
}

TEST(Planner, TheConfigurationIsTheFirstRow) {
  if (ranks() > 1) GTEST_SKIP() << "one process plans";
  struct Case {
    const char* parallel;
    int stages, ranks, parts;
  };
  for (const Case& c : {Case{"graph", 0, 4, 4}, Case{"hybrid", 2, 8, 4}, Case{"pipeline", 2, 2, 1},
                        Case{"hybrid", 4, 8, 2}}) {
    TrainConfig config = small_config("gcn", "none");
    config.dataset = "synth:default";
    config.num_layers = 4;
    config.parallel = c.parallel;
    config.stages = c.stages;
    const std::vector<int> plan_ranks = {c.ranks, 1};
    const PlanReport r = make_plan(config, plan_ranks, /*progress=*/false);
    const std::string at = std::string(c.parallel) + " on " + std::to_string(c.ranks);
    ASSERT_FALSE(r.rows.empty()) << at;
    EXPECT_EQ(r.rows[0].mode, c.parallel) << at;
    EXPECT_EQ(r.rows[0].ranks, c.ranks) << at;
    EXPECT_EQ(r.rows[0].parts, c.parts) << at;
    EXPECT_EQ(r.rows[0].memory.size(), static_cast<std::size_t>(c.ranks)) << at;
    EXPECT_EQ(r.parts.size(), static_cast<std::size_t>(c.parts)) << at;
    EXPECT_GT(r.rows[0].max_peak(), r.facts.baseline) << at;
  }
  // Stages that do not divide the ranks are refused by name.
  TrainConfig bad = small_config("gcn", "none");
  bad.dataset = "synth:default";
  bad.parallel = "hybrid";
  bad.stages = 3;
  const std::vector<int> four = {4};
  EXPECT_THROW(make_plan(bad, four, false), Error);
}

// The table's alternatives are configurations train_gcn accepts and the planner can measure: the
// pipelined modes for a GCN in f32, none for one that aggregates in bf16 (graph mode alone) or
// for GCNII; and the plan does not fail on them.
TEST(Planner, AlternativesAreConfigurationsThatRun) {
  if (ranks() > 1) GTEST_SKIP() << "one process plans";
  const std::vector<int> plan_ranks = {4};
  for (const char* dtype : {"f32", "bf16"}) {
    TrainConfig config = small_config("gcn", "none");
    config.dataset = "synth:default";
    config.num_layers = 4;
    config.aggregate_dtype = dtype;
    const PlanReport r = make_plan(config, plan_ranks, /*progress=*/false);
    std::set<std::string> modes;
    for (const PlanEstimate& e : r.rows) modes.insert(e.mode);
    const bool f32 = std::string(dtype) == "f32";
    EXPECT_EQ(modes.count("pipeline"), f32 ? 1u : 0u) << dtype;
    EXPECT_EQ(modes.count("hybrid"), f32 ? 1u : 0u) << dtype;
    EXPECT_EQ(modes.count("graph"), 1u) << dtype;
  }
  // GCNII runs pipelined, but a stage of one GCNII layer is no model the planner can measure.
  TrainConfig gcnii = small_config("gcnii", "none");
  gcnii.dataset = "synth:default";
  gcnii.num_layers = 4;
  for (const PlanEstimate& e : make_plan(gcnii, plan_ranks, /*progress=*/false).rows)
    EXPECT_EQ(e.mode, "graph");
}

}  // namespace
}  // namespace tessera
