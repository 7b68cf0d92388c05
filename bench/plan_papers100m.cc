// SPDX-License-Identifier: Apache-2.0
// The planner's prediction for ogbn-papers100M (engine/planner.h), which no process here can
// load: a 3-layer GCN, hidden 256, on 16, 32 and 64 ranks (GPUs of 80 GB, or CPU nodes of
// 256 GB), from the dataset's published sizes and an assumed cut. The training step's memory is
// measured here as train_gcn --plan measures it (small synthetic graphs of papers100M's widths
// and mean degree); the parts are assumed equal (N/K rows, E/K entries) with H = r * N/K halo
// rows for r in --halo-ratios (METIS on products-like gives r = 0.55 at 4 parts here; r grows
// with K), half of a part's entries in halo columns and as many rows sent as received. Each rank
// reads its part from a partition store (no rank loads the graph). Prints a table.
//
// Usage: bench/plan_papers100m [--ranks 16 32 64] [--halo-ratios 0.5 1 2] [--hidden 256]
//        [--layers 3] [--codecs none bf16 int8]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "comm/codec.h"
#include "engine/planner.h"
#include "engine/system.h"

int main(int argc, char** argv) {
  using namespace tessera;
  CLI::App app{"plan_papers100m: the planner's prediction for ogbn-papers100M"};
  std::vector<int> ranks = {16, 32, 64};
  std::vector<double> ratios = {0.5, 1.0, 2.0};
  std::vector<std::string> codecs = {"none", "bf16", "int8"};
  int hidden = 256, layers = 3;
  std::int64_t probe_rows = 16384;
  app.add_option("--ranks", ranks, "rank counts")->check(CLI::Range(2, 65536));
  app.add_option("--halo-ratios", ratios, "halo rows per owned row (assumed)")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--codecs", codecs, "halo codecs");
  app.add_option("--hidden", hidden, "hidden channels")->check(CLI::Range(1, 65536));
  app.add_option("--layers", layers, "layers")->check(CLI::Range(2, 1024));
  app.add_option("--probe-rows", probe_rows, "rows of the smaller probe graph")
      ->check(CLI::Range(64, 1 << 24));
  CLI11_PARSE(app, argc, argv);
  for (const std::string& codec : codecs) {
    try {
      parse_codec(codec);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "plan_papers100m: error: --codecs: %s\n", e.what());
      return 2;
    }
  }

  // ogbn-papers100M (OGB): nodes, directed edges (the training graph holds both directions),
  // features, classes, training nodes.
  DatasetInfo data;
  data.name = "ogbn-papers100M";
  data.num_nodes = 111059956;
  data.num_edges = 1615685872;
  data.num_features = 128;
  data.num_classes = 172;
  const std::int64_t entries = 2 * data.num_edges;
  const std::int64_t train = 1207179;

  TrainConfig config;
  config.model = "gcn";
  config.num_layers = layers;
  config.hidden_channels = hidden;
  config.dropout = 0.5f;
  config.verbosity = 0;
  config.handle_signals = false;
  MachineFacts facts;
  facts.baseline = current_rss_bytes();
  const double degree = static_cast<double>(entries) / static_cast<double>(data.num_nodes);
  const StepMemory step = measure_step_memory(config, data, degree, probe_rows);
  std::printf(
      "ogbn-papers100M: %lld nodes, %lld adjacency entries, %lld features, %lld classes; "
      "%d-layer GCN, hidden %d\n",
      static_cast<long long>(data.num_nodes), static_cast<long long>(entries),
      static_cast<long long>(data.num_features), static_cast<long long>(data.num_classes), layers,
      hidden);
  std::printf(
      "Measured here: a training step keeps %.0f bytes a row + %.1f MiB; a process "
      "%.2f GiB before loading\n\n",
      step.per_row, step.fixed / 1048576.0, static_cast<double>(facts.baseline) / (1u << 30));
  std::printf(
      "| ranks | halo rows / owned | codec | GPU memory a rank (GB) | fits 80 GB | host "
      "memory a rank (GB) | fits 256 GB | GB an epoch |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const int k : ranks) {
    for (const double r : ratios) {
      std::vector<PartShape> parts(static_cast<std::size_t>(k));
      for (PartShape& p : parts) {
        p.owned = data.num_nodes / k;
        p.halo = static_cast<std::int64_t>(r * static_cast<double>(p.owned));
        p.entries = entries / k;
        p.halo_entries = p.entries / 2;
        p.send = p.halo;
        p.boundary = std::min(p.owned, p.halo);
        p.train = train / k;
      }
      for (const std::string& codec : codecs) {
        PlanInputs in;
        in.config = config;
        in.config.codec = codec;
        in.data = data;
        in.entries = entries;
        in.parts = parts;
        in.source = PartSourceKind::Store;
        in.facts = facts;
        in.step = step;
        in.ranks = k;
        const PlanEstimate e = estimate_plan(in);
        const double host = static_cast<double>(e.max_peak());
        double device = 0.0;
        for (const RankMemory& m : e.memory)
          device = std::max(device, static_cast<double>(m.device));
        std::printf("| %d | %.1f | %s | %.1f | %s | %.1f | %s | %.1f |\n", k, r, codec.c_str(),
                    device / 1e9, device <= 80e9 ? "yes" : "no", host / 1e9,
                    host <= 256e9 ? "yes" : "no", e.bytes_per_epoch() / 1e9);
      }
    }
  }
  return 0;
}
