// SPDX-License-Identifier: Apache-2.0
// bench_pipeline: graph, pipeline and hybrid parallelism across model depths. The dataset is
// partitioned once per part count (METIS: K parts for graph mode, K / S for hybrid), then for
// every depth and mode mpiexec -n K train_gcn trains a residual GCN for a fixed epoch budget and
// the bench reads its summary and per-epoch metrics: bytes per epoch by category against the
// traffic model (engine/traffic_model.h), the median epoch, peak RSS per rank and the accuracy.
// Per depth: graph-mode over pipeline-mode bytes, measured and predicted, and their epoch-time
// ratio. --csv writes the points of scripts/plot_pipeline.py. --device cuda trains every run on
// GPUs (--gpu-comm mpi: the K ranks may share one); TESSERA_MPIEXEC, TESSERA_TRAIN_GCN and
// TESSERA_PARTITION_GRAPH point at binaries moved elsewhere (the GPU pack).
#include <CLI/CLI.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "engine/modes.h"
#include "engine/system.h"
#include "engine/traffic_model.h"
#include "engine/train_config.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr int kWarmupEpochs = 1;  // trained like the others, left out of the epoch-time medians

struct Flags {
  std::string dataset = "synth:arxiv-like";
  std::vector<int> depths = {4, 8, 16, 32};
  std::vector<std::string> modes = parallel_mode_names();
  int ranks = 4;
  int hybrid_stages = 2;
  int chunks = 0;  // 0: train_gcn's default
  std::string model = "resgcn";
  std::int64_t hidden = 128;
  int epochs = 30;
  int eval_every = 5;
  int runs = 1;
  double lr = 0.01;
  double dropout = 0.5;
  int cores = 2;
  double memory_budget_gb = 0;  // 0: train_gcn's default
  std::string device = "cpu";
  std::string gpu_comm = "nccl";
  std::string json_file;
  std::string csv_file;
  std::string tmpdir;
};


// A flag value for train_gcn (6 significant digits, as the flags are floats there).
std::string flag_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

int threads_per_rank(const Flags& f) { return std::max(1, f.cores / f.ranks); }



// ---- partition stores ----

struct Store {
  int parts = 0;
  fs::path path;
  std::int64_t edge_cut = 0, halo_nodes = 0;
  double partition_s = kNaN;  // the partitioner alone (meta.json)
  double wall_s = kNaN;       // partition_graph: load, partition, write
};

Store make_store(const Flags& flags, int parts, const fs::path& scratch) {
  Store s;
  s.parts = parts;
  s.path = scratch / ("store-" + std::to_string(parts));
  std::fprintf(stderr, "[bench_pipeline] partitioning %s into %d parts (METIS)\n",
               flags.dataset.c_str(), parts);
  s.wall_s = run_child("bench_pipeline",
                       {program_path("TESSERA_PARTITION_GRAPH", PARTITION_GRAPH_PATH), "--dataset",
                        flags.dataset, "--parts", std::to_string(parts), "--partition", "metis",
                        "--out", s.path.string(), "--quiet"},
                       child_env(threads_per_rank(flags)),
                       scratch / ("partition-" + std::to_string(parts)));
  const Json stats = Json::parse(read_text(s.path / "meta.json")).at("stats");
  s.edge_cut = stats.at("edge_cut").get<std::int64_t>();
  s.halo_nodes = stats.at("halo_nodes_total").get<std::int64_t>();
  s.partition_s = stats.at("seconds").get<double>();
  return s;
}

// ---- one run: a depth in a mode ----

struct Run {
  int depth = 0;
  ParallelMode mode = ParallelMode::Graph;
  int parts = 1, stages = 1;  // graph: K x 1; pipeline: 1 x K; hybrid: K / S x S
  int chunks = 0;             // per part, as the summary reports it (0: graph mode, or unknown)
  std::string error;          // why the run failed; empty when it did not
  std::int64_t nodes = 0, f_in = 0, outputs = 0, halo_nodes = 0;
  double halo_forward = 0, halo_backward = 0, pipeline = 0, all_reduce = 0;  // bytes per epoch
  double model_halo = 0, model_pipeline = 0;                               // the traffic model
  EpochTimes times;  // from the metrics file, warm-up epochs left out
  double peak_rss_max = kNaN;
  std::vector<double> peak_rss_per_rank;  // when the summary has it
  double final_test = kNaN, final_test_std = kNaN, test_at_best = kNaN, best_valid = kNaN;
  double load_s = kNaN, setup_s = kNaN, wall_s = kNaN;

  bool ok() const { return error.empty(); }
  // What the traffic model covers: halo exchanges and pipeline streams.
  double traffic() const { return halo_forward + halo_backward + pipeline; }
  double total() const { return traffic() + all_reduce; }
  double model() const { return model_halo + model_pipeline; }
};

std::string slug(const Run& r) { return "d" + std::to_string(r.depth) + "-" + to_string(r.mode); }

std::vector<std::string> train_command(const Flags& flags, const Run& r, const Store* store,
                                       const fs::path& summary, const fs::path& metrics) {
  std::vector<std::string> argv = {program_path("TESSERA_MPIEXEC", MPIEXEC_PATH),
                                   MPIEXEC_NUMPROC_FLAG, std::to_string(flags.ranks),
                                   program_path("TESSERA_TRAIN_GCN", TRAIN_GCN_PATH)};
  if (store != nullptr) {
    argv.insert(argv.end(), {"--partitions", store->path.string()});
  } else {
    argv.insert(argv.end(), {"--dataset", flags.dataset});
  }
  argv.insert(argv.end(), {"--parallel", to_string(r.mode), "--device", flags.device});
  if (flags.device != "cpu") argv.insert(argv.end(), {"--gpu-comm", flags.gpu_comm});
  if (r.mode != ParallelMode::Graph) {
    argv.insert(argv.end(), {"--stages", std::to_string(r.stages)});
    if (flags.chunks > 0) argv.insert(argv.end(), {"--chunks", std::to_string(flags.chunks)});
    if (flags.memory_budget_gb > 0) {
      argv.insert(argv.end(), {"--memory-budget", flag_text(flags.memory_budget_gb)});
    }
  }
  argv.insert(argv.end(),
              {"--model", flags.model, "--num-layers", std::to_string(r.depth),
               "--hidden-channels", std::to_string(flags.hidden), "--dropout",
               flag_text(flags.dropout), "--lr", flag_text(flags.lr), "--epochs",
               std::to_string(flags.epochs), "--eval-every", std::to_string(flags.eval_every),
               "--runs", std::to_string(flags.runs), "--threads",
               std::to_string(threads_per_rank(flags)), "--quiet", "--summary", summary.string(),
               "--metrics", metrics.string()});
  return argv;
}

void read_summary(Run& r, const fs::path& summary) {
  const Json s = Json::parse(read_text(summary));
  r.nodes = s.at("nodes").get<std::int64_t>();
  r.f_in = s.at("features").get<std::int64_t>();
  r.outputs = s.at("outputs").get<std::int64_t>();
  const Json& bytes = s.at("comm_bytes_per_epoch");
  r.halo_forward = bytes.at("halo_forward").get<double>();
  r.halo_backward = bytes.at("halo_backward").get<double>();
  r.pipeline = bytes.at("pipeline").get<double>();
  r.all_reduce = bytes.at("all_reduce").get<double>();
  r.peak_rss_max = s.at("peak_rss_bytes_max").get<double>();
  if (s.contains("peak_rss_bytes_per_rank")) {
    r.peak_rss_per_rank = s.at("peak_rss_bytes_per_rank").get<std::vector<double>>();
  }
  r.final_test = s.at("final_test_acc").get<double>();
  r.final_test_std = s.at("final_test_acc_std").get<double>();
  r.test_at_best = s.at("test_acc_at_best_valid").get<double>();
  r.best_valid = s.at("best_valid_acc").get<double>();
  r.load_s = s.at("load_s").get<double>();
  r.setup_s = s.at("setup_s").get<double>();
  // The layout train_gcn reports (summaries from before it did lack these keys).
  if (s.contains("parallel")) {
    const std::string mode = s.at("parallel").get<std::string>();
    TESSERA_CHECK(mode == to_string(r.mode) && s.at("graph_parts").get<int>() == r.parts &&
                      s.at("stages").get<int>() == r.stages,
                  InvalidInput, summary.string(), ": expected --parallel ", to_string(r.mode),
                  " with ", r.parts, " parts x ", r.stages, " stages, the summary says ", mode,
                  " with ", s.at("graph_parts").dump(), " x ", s.at("stages").dump());
    if (r.mode != ParallelMode::Graph) r.chunks = s.at("chunks").get<int>();
  }
  const Json& partition = s.at("partition");
  if (partition.contains("halo_nodes")) {
    r.halo_nodes = partition.at("halo_nodes").get<std::int64_t>();
  }
}

// The traffic model of the run's mode: graph Σ_p M_p Σ_l (w_fwd + w_bwd) 4 B; pipeline
// 2 (S - 1) N H 4 B; hybrid both, the halo term over the K / S parts' halo total.
void apply_model(const Flags& flags, Run& r) {
  const ExchangedWidths widths = exchanged_widths(r.depth, r.f_in, flags.hidden, r.outputs);
  if (r.mode != ParallelMode::Pipeline) {
    r.model_halo = graph_mode_bytes(r.halo_nodes, widths, CodecKind::None, CodecKind::None);
  }
  if (r.mode != ParallelMode::Graph) {
    r.model_pipeline =
        pipeline_mode_bytes(r.stages, r.nodes, flags.hidden, CodecKind::None, CodecKind::None);
  }
}

// The last "error:" line train_gcn wrote, else mpiexec's line saying how a rank ended (killed:
// often out of memory), else the exception's text; '|' replaced so that it fits a table cell.
std::string failure_reason(const fs::path& log, const std::exception& e) {
  auto last_line_with = [](const std::string& file, const char* word) {
    std::ifstream in(file);
    std::string line, found;
    while (std::getline(in, line))
      if (line.find(word) != std::string::npos) found = line;
    return found;
  };
  std::string reason = last_line_with(log.string() + ".err", "error:");
  if (reason.empty()) reason = last_line_with(log.string() + ".out", "EXIT STRING");
  if (reason.empty()) reason = e.what();
  std::replace(reason.begin(), reason.end(), '|', '/');
  return reason;
}

// The dataset's sizes, from the first run that finished (a failed run still gets its model).
struct DatasetSizes {
  std::int64_t nodes = 0, f_in = 0, outputs = 0;
};

Run measure(const Flags& flags, int depth, ParallelMode mode, const std::map<int, Store>& stores,
            std::optional<DatasetSizes>& sizes, const fs::path& scratch) {
  Run r;
  r.depth = depth;
  r.mode = mode;
  const Store* store = nullptr;
  switch (mode) {
    case ParallelMode::Graph: r.parts = flags.ranks; break;
    case ParallelMode::Pipeline: r.stages = flags.ranks; break;
    case ParallelMode::Hybrid:
      r.stages = flags.hybrid_stages;
      r.parts = flags.ranks / flags.hybrid_stages;
      break;
  }
  if (r.parts > 1) {
    store = &stores.at(r.parts);
    r.halo_nodes = store->halo_nodes;  // the summary's own figure replaces it when present
  }
  const fs::path summary = scratch / (slug(r) + ".summary.json");
  const fs::path metrics = scratch / (slug(r) + ".metrics.jsonl");
  const fs::path log = scratch / (slug(r) + ".train");
  std::fprintf(stderr, "[bench_pipeline] depth %d, %s (%d parts x %d stages): training\n", depth,
               to_string(mode).c_str(), r.parts, r.stages);
  try {
    r.wall_s = run_child("bench_pipeline", train_command(flags, r, store, summary, metrics),
                         child_env(threads_per_rank(flags)), log);
    read_summary(r, summary);
    r.times = read_epoch_times(metrics, kWarmupEpochs);
  } catch (const std::exception& e) {
    r.error = failure_reason(log, e);
    std::fprintf(stderr, "[bench_pipeline] depth %d, %s failed: %s\n", depth,
                 to_string(mode).c_str(), r.error.c_str());
    if (sizes) {
      r.nodes = sizes->nodes;
      r.f_in = sizes->f_in;
      r.outputs = sizes->outputs;
      apply_model(flags, r);
    }
    return r;
  }
  if (!sizes) sizes = DatasetSizes{r.nodes, r.f_in, r.outputs};
  apply_model(flags, r);
  return r;
}

// ---- the report ----

Json run_json(const Flags& flags, const Run& r) {
  Json j = {{"dataset", flags.dataset}, {"ranks", flags.ranks}, {"mode", to_string(r.mode)},
            {"parts", r.parts}, {"stages", r.stages},
            {"chunks", r.chunks > 0 ? Json(r.chunks) : Json(nullptr)},
            {"model", flags.model}, {"depth", r.depth}, {"hidden", flags.hidden},
            {"epochs", flags.epochs}, {"warmup_epochs", kWarmupEpochs},
            {"eval_every", flags.eval_every}, {"runs", flags.runs},
            {"threads_per_rank", threads_per_rank(flags)}};
  if (!r.ok()) {
    j["error"] = r.error;
    j["halo_nodes"] = r.halo_nodes;
    j["model_bytes"] = r.nodes > 0 ? Json(r.model()) : Json(nullptr);  // sizes from another run
    return j;
  }
  j.update(Json{{"nodes", r.nodes}, {"features", r.f_in}, {"outputs", r.outputs},
                {"halo_nodes", r.halo_nodes}, {"halo_forward_bytes", r.halo_forward},
                {"halo_backward_bytes", r.halo_backward}, {"pipeline_bytes", r.pipeline},
                {"all_reduce_bytes", r.all_reduce}, {"traffic_bytes", r.traffic()},
                {"total_bytes", r.total()}, {"model_halo_bytes", r.model_halo},
                {"model_pipeline_bytes", r.model_pipeline}, {"model_bytes", r.model()},
                {"traffic_vs_model", number(ratio(r.traffic(), r.model()))},
                {"epoch_s_median", r.times.epoch_s}, {"epoch_s_min", r.times.epoch_min_s},
                {"epoch_s_max", r.times.epoch_max_s},
                {"first_epoch_s", number(r.times.first_epoch_s)},
                {"comm_s", r.times.comm_s}, {"final_test_acc", r.final_test},
                {"final_test_acc_std", r.final_test_std},
                {"test_acc_at_best_valid", r.test_at_best}, {"best_valid_acc", r.best_valid},
                {"peak_rss_bytes_max", r.peak_rss_max},
                {"peak_rss_bytes_per_rank",
                 r.peak_rss_per_rank.empty() ? Json(nullptr) : Json(r.peak_rss_per_rank)},
                {"load_s", r.load_s}, {"setup_s", r.setup_s}, {"train_wall_s", r.wall_s}});
  return j;
}

// Per depth: graph mode against pipeline mode (and hybrid against graph when it ran).
struct DepthComparison {
  int depth = 0;
  double graph = 0, pipeline = 0, model_graph = 0, model_pipeline = 0;
  double graph_total = 0, pipeline_total = 0, graph_epoch_s = 0, pipeline_epoch_s = 0;
  double hybrid = kNaN, hybrid_epoch_s = kNaN;

  double measured() const { return ratio(graph, pipeline); }
  double model() const { return ratio(model_graph, model_pipeline); }
};

const Run* find_run(const std::vector<Run>& runs, int depth, ParallelMode mode) {
  for (const Run& r : runs)
    if (r.depth == depth && r.mode == mode && r.ok()) return &r;
  return nullptr;
}

std::optional<DepthComparison> compare(const std::vector<Run>& runs, int depth) {
  const Run* g = find_run(runs, depth, ParallelMode::Graph);
  const Run* p = find_run(runs, depth, ParallelMode::Pipeline);
  if (g == nullptr || p == nullptr) return std::nullopt;
  DepthComparison c;
  c.depth = depth;
  c.graph = g->traffic();
  c.pipeline = p->traffic();
  c.model_graph = g->model();
  c.model_pipeline = p->model();
  c.graph_total = g->total();
  c.pipeline_total = p->total();
  c.graph_epoch_s = g->times.epoch_s;
  c.pipeline_epoch_s = p->times.epoch_s;
  if (const Run* h = find_run(runs, depth, ParallelMode::Hybrid)) {
    c.hybrid = h->traffic();
    c.hybrid_epoch_s = h->times.epoch_s;
  }
  return c;
}

Json comparison_json(const DepthComparison& c) {
  return {{"depth", c.depth}, {"graph_bytes", c.graph}, {"pipeline_bytes", c.pipeline},
          {"graph_vs_pipeline_bytes", number(c.measured())},
          {"model_graph_bytes", c.model_graph}, {"model_pipeline_bytes", c.model_pipeline},
          {"model_graph_vs_pipeline", number(c.model())},
          {"measured_vs_model", number(ratio(c.measured(), c.model()))},
          {"graph_vs_pipeline_total_bytes", number(ratio(c.graph_total, c.pipeline_total))},
          {"graph_vs_pipeline_epoch_s", number(ratio(c.graph_epoch_s, c.pipeline_epoch_s))},
          {"hybrid_vs_graph_bytes", number(ratio(c.hybrid, c.graph))},
          {"hybrid_vs_graph_epoch_s", number(ratio(c.hybrid_epoch_s, c.graph_epoch_s))}};
}

std::string label(const Run& r) {
  return "| " + std::to_string(r.depth) + " | " + to_string(r.mode) + " |";
}

void print_stores(const Flags& flags, const std::map<int, Store>& stores) {
  std::printf("\n## Partitions (METIS)\n\n");
  std::printf("| parts | used by | edge cut | halo nodes | partition s | partition_graph s |\n");
  std::printf("|--:|---|--:|--:|--:|--:|\n");
  for (const auto& [parts, s] : stores) {
    std::printf("| %d | %s | %lld | %lld | %.2f | %.2f |\n", parts,
                parts == flags.ranks ? "graph" : "hybrid",
                static_cast<long long>(s.edge_cut), static_cast<long long>(s.halo_nodes),
                s.partition_s, s.wall_s);
  }
}

void print_traffic_table(const std::vector<Run>& runs) {
  std::printf("\n## Traffic per training epoch (MB, sent by all ranks) against the model\n\n");
  std::printf("| depth | mode | halo nodes | halo fwd MB | halo bwd MB | pipeline MB | "
              "all-reduce MB | total MB | halo + pipeline MB | model MB | measured / model |\n");
  std::printf("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (const Run& r : runs) {
    if (!r.ok()) {
      std::printf("%s %lld | failed: %s | | | | | | | %s | |\n", label(r).c_str(),
                  static_cast<long long>(r.halo_nodes), r.error.c_str(),
                  r.nodes > 0 ? fixed(r.model() / kMB, 2).c_str() : "-");
      continue;
    }
    std::printf("%s %lld | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n",
                label(r).c_str(), static_cast<long long>(r.halo_nodes), r.halo_forward / kMB,
                r.halo_backward / kMB, r.pipeline / kMB, r.all_reduce / kMB, r.total() / kMB,
                r.traffic() / kMB, r.model() / kMB,
                fixed(ratio(r.traffic(), r.model()), 4).c_str());
  }
}

std::string rss_per_rank(const Run& r) {
  if (r.peak_rss_per_rank.empty()) return "-";
  std::string text;
  for (double b : r.peak_rss_per_rank) text += (text.empty() ? "" : " ") + fixed(b / kMB, 0);
  return text;
}

void print_time_table(const std::vector<Run>& runs) {
  std::printf("\n## Time, memory and accuracy\n\n");
  std::printf("| depth | mode | parts x stages (chunks) | epoch ms | min ms | max ms | epoch 1 ms "
              "| eval ms | eval 1 ms | comm ms | peak RSS MB (max rank) | peak RSS MB per rank "
              "| final test acc %% | test at best valid %% | run wall s |\n");
  std::printf("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|\n");
  for (const Run& r : runs) {
    if (!r.ok()) {
      std::printf("%s %d x %d | failed | | | | | | | | | | | |\n", label(r).c_str(), r.parts,
                  r.stages);
      continue;
    }
    const std::string chunks = r.chunks > 0 ? " (" + std::to_string(r.chunks) + ")" : "";
    std::printf("%s %d x %d%s | %.1f | %.1f | %.1f | %s | %s | %s | %.1f | %.0f | %s | %.2f ± %.2f "
                "| %.2f | %.1f |\n",
                label(r).c_str(), r.parts, r.stages, chunks.c_str(), 1e3 * r.times.epoch_s,
                1e3 * r.times.epoch_min_s, 1e3 * r.times.epoch_max_s,
                fixed(1e3 * r.times.first_epoch_s, 1).c_str(), fixed(1e3 * r.times.eval_s, 1).c_str(),
                fixed(1e3 * r.times.first_eval_s, 1).c_str(), 1e3 * r.times.comm_s,
                r.peak_rss_max / kMB, rss_per_rank(r).c_str(), 100 * r.final_test,
                100 * r.final_test_std, 100 * r.test_at_best, r.wall_s);
  }
}

void print_comparison_table(const std::vector<DepthComparison>& comparisons) {
  std::printf("\n## Graph vs pipeline per depth (one run each; halo + pipeline bytes)\n\n");
  std::printf("| depth | graph MB | pipeline MB | graph / pipeline | model ratio | measured / "
              "model | incl. all-reduce | epoch graph / pipeline | hybrid MB | hybrid / graph | "
              "epoch hybrid / graph |\n");
  std::printf("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (const DepthComparison& c : comparisons) {
    std::printf("| %d | %.2f | %.2f | %.3f | %.3f | %s | %s | %s | %s | %s | %s |\n", c.depth,
                c.graph / kMB, c.pipeline / kMB, c.measured(), c.model(),
                fixed(ratio(c.measured(), c.model()), 4).c_str(),
                fixed(ratio(c.graph_total, c.pipeline_total), 3).c_str(),
                fixed(ratio(c.graph_epoch_s, c.pipeline_epoch_s), 3).c_str(),
                fixed(c.hybrid / kMB, 2).c_str(), fixed(ratio(c.hybrid, c.graph), 3).c_str(),
                fixed(ratio(c.hybrid_epoch_s, c.graph_epoch_s), 3).c_str());
  }
}

void print_report(const Flags& flags, const std::map<int, Store>& stores,
                  const std::vector<Run>& runs, const std::vector<DepthComparison>& comparisons,
                  double load_start, double total_s) {
  std::printf(
      "\n# bench_pipeline | %s, K = %d ranks x %d threads on %s, %s hidden %lld, %d epochs "
      "x %d runs, lr %g, dropout %g | total %.1f s | 1-min load average %.2f before, "
      "%.2f after (other processes competing inflate times)\n",
      flags.dataset.c_str(), flags.ranks, threads_per_rank(flags),
      flags.device == "cpu" ? "the CPU"
                            : (flags.device + " (--gpu-comm " + flags.gpu_comm + ")").c_str(),
      flags.model.c_str(), static_cast<long long>(flags.hidden), flags.epochs, flags.runs, flags.lr,
      flags.dropout, total_s, load_start, load_average());
  print_stores(flags, stores);
  print_traffic_table(runs);
  print_time_table(runs);
  print_comparison_table(comparisons);
  std::printf(
      "\nNotes:\n"
      "- MB = 10^6 bytes, per training epoch (mean over the epochs of the last run), sent by all "
      "ranks; evaluation is excluded. Modes: graph = K parts x 1 stage; pipeline = 1 part x K "
      "stages; hybrid = K / %d parts x %d stages. Chunks per part (--chunks %s) in brackets "
      "in the time table.\n"
      "- Model (engine/traffic_model.h, f32): graph = 4 B x halo nodes x Σ layers (w_fwd + "
      "w_bwd); pipeline = 2 (S - 1) N H x 4 B; hybrid = both, with S = %d and the halo nodes of "
      "the K / S parts. It covers halo and pipeline bytes, not the all-reduce (weight "
      "gradients: graph mode over all K ranks, pipelined modes over the parts of each stage).\n"
      "- Times: epoch = rank 0's training step (which waits for the others in the all-reduce), "
      "median over epochs %d..%d of every run; epoch 1 is the warm-up (first touch of every "
      "buffer). eval = the exact evaluation pass, median after the first (eval 1: the first, "
      "warm-up included). comm = communication "
      "time, mean over ranks. Ratios come from one invocation on a shared machine: compare "
      "them, not absolute times, across invocations.\n"
      "- Accuracy: final test accuracy (mean ± std over runs) and test accuracy at the best "
      "validation accuracy (evaluated every %d epochs and at the last), after a fixed budget of "
      "%d epochs whatever the depth.\n",
      flags.hybrid_stages, flags.hybrid_stages,
      flags.chunks > 0 ? std::to_string(flags.chunks).c_str() : "0: train_gcn's default",
      flags.hybrid_stages, kWarmupEpochs + 1,
      flags.epochs, flags.eval_every, flags.epochs);
  std::fflush(stdout);
}

std::string csv_text(const std::vector<Run>& runs) {
  std::string text =
      "depth,mode,bytes_per_epoch,model_bytes_per_epoch,total_bytes_per_epoch,halo_forward,"
      "halo_backward,pipeline,all_reduce,epoch_s,final_test_acc,final_test_acc_std,"
      "test_acc_at_best_valid,status\n";
  char buf[512];
  for (const Run& r : runs) {
    if (!r.ok()) {  // the model only, when the dataset's sizes are known
      if (r.nodes == 0) continue;
      std::snprintf(buf, sizeof buf, "%d,%s,,%.0f,,,,,,,,,,failed\n", r.depth,
                    to_string(r.mode).c_str(), r.model());
      text += buf;
      continue;
    }
    std::snprintf(buf, sizeof buf,
                  "%d,%s,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.6f,%.6f,%.6f,%.6f,ok\n", r.depth,
                  to_string(r.mode).c_str(), r.traffic(), r.model(), r.total(), r.halo_forward,
                  r.halo_backward, r.pipeline, r.all_reduce, r.times.epoch_s, r.final_test,
                  r.final_test_std, r.test_at_best);
    text += buf;
  }
  return text;
}

// ---- the run ----

// Refuses, before anything runs, a combination train_gcn would refuse after loading.
void check_flags(const Flags& flags, const std::vector<ParallelMode>& modes) {
  const int shallowest = *std::min_element(flags.depths.begin(), flags.depths.end());
  for (ParallelMode mode : modes) {
    if (mode == ParallelMode::Pipeline) {
      TESSERA_CHECK(shallowest >= flags.ranks, InvalidArgument, "--depths: pipeline mode needs "
                    "at least --ranks ", flags.ranks, " layers (one stage per rank), got ",
                    shallowest);
    }
    if (mode == ParallelMode::Hybrid) {
      TESSERA_CHECK(flags.ranks % flags.hybrid_stages == 0 &&
                        flags.ranks / flags.hybrid_stages >= 2,
                    InvalidArgument, "--hybrid-stages ", flags.hybrid_stages,
                    " must divide --ranks ", flags.ranks, " into at least 2 graph parts");
      TESSERA_CHECK(shallowest >= flags.hybrid_stages, InvalidArgument, "--depths: hybrid mode "
                    "needs at least --hybrid-stages ", flags.hybrid_stages, " layers, got ",
                    shallowest);
    }
  }
}

int run(Flags flags) {
  std::vector<ParallelMode> modes;
  for (const std::string& m : flags.modes) modes.push_back(parse_parallel_mode(m));
  std::sort(flags.depths.begin(), flags.depths.end());
  flags.depths.erase(std::unique(flags.depths.begin(), flags.depths.end()), flags.depths.end());
  check_flags(flags, modes);
  const double load_start = load_average();
  Stopwatch total;
  JsonLines out;
  const ScratchDir scratch(flags.tmpdir.empty() ? fs::temp_directory_path()
                                                : fs::path(flags.tmpdir));
  std::map<int, Store> stores;  // by part count
  for (ParallelMode mode : modes) {
    const int parts = mode == ParallelMode::Graph    ? flags.ranks
                      : mode == ParallelMode::Hybrid ? flags.ranks / flags.hybrid_stages
                                                     : 1;
    if (parts > 1 && !stores.count(parts)) {
      const Store& s = stores[parts] = make_store(flags, parts, scratch.path());
      out.emit("partition", {{"dataset", flags.dataset}, {"parts", parts},
                             {"edge_cut", s.edge_cut}, {"halo_nodes", s.halo_nodes},
                             {"partition_s", s.partition_s}, {"partition_wall_s", s.wall_s}});
    }
  }
  std::vector<Run> runs;
  std::vector<DepthComparison> comparisons;
  std::optional<DatasetSizes> sizes;
  for (int depth : flags.depths) {
    for (ParallelMode mode : modes) {
      runs.push_back(measure(flags, depth, mode, stores, sizes, scratch.path()));
      out.emit("parallel_mode", run_json(flags, runs.back()));
    }
    if (const std::optional<DepthComparison> c = compare(runs, depth)) {
      comparisons.push_back(*c);
      out.emit("graph_vs_pipeline", comparison_json(*c));
    }
  }
  const long failed = std::count_if(runs.begin(), runs.end(), [](const Run& r) { return !r.ok(); });
  out.emit("timing", {{"total_s", total.seconds()}, {"failed_runs", failed},
                      {"cores", flags.cores}, {"online_cores", ::sysconf(_SC_NPROCESSORS_ONLN)},
                      {"load_avg_1min_start", load_start},
                      {"load_avg_1min_end", load_average()}});
  print_report(flags, stores, runs, comparisons, load_start, total.seconds());
  if (!flags.json_file.empty()) write_file_atomic(flags.json_file, out.all());
  if (!flags.csv_file.empty()) write_file_atomic(flags.csv_file, csv_text(runs));
  if (failed > 0) {
    std::fprintf(stderr, "bench_pipeline: error: %ld of %zu runs failed (see the tables)\n",
                 failed, runs.size());
    return 1;
  }
  return 0;
}

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--dataset", f.dataset, "dataset spec (synth:PRESET, .h5 file, OGB dir)")
      ->capture_default_str();
  app.add_option("--depths", f.depths, "model depths (layers)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--modes", f.modes, "parallel modes")
      ->delimiter(',')
      ->check(CLI::IsMember(parallel_mode_names()))
      ->capture_default_str();
  app.add_option("--ranks", f.ranks, "MPI ranks K (pipeline mode: K stages)")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  app.add_option("--hybrid-stages", f.hybrid_stages, "hybrid mode: stages S per graph part")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  app.add_option("--chunks", f.chunks, "pipelined modes: chunks per part (0: train_gcn's default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--model", f.model, "gcn or resgcn")
      ->check(CLI::IsMember({"gcn", "resgcn"}))
      ->capture_default_str();
  app.add_option("--hidden-channels", f.hidden, "hidden width H")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str();
  app.add_option("--epochs", f.epochs, "training epochs per run (the first is the warm-up)")
      ->check(CLI::Range(kWarmupEpochs + 1, 1 << 20))
      ->capture_default_str();
  app.add_option("--eval-every", f.eval_every, "evaluate every N epochs (and after the last)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--runs", f.runs, "runs (seeds) per configuration")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", f.lr, "Adam learning rate")->capture_default_str();
  app.add_option("--dropout", f.dropout, "dropout")->capture_default_str();
  app.add_option("--cores", f.cores, "cores to share: max(1, cores / K) threads per rank")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--memory-budget", f.memory_budget_gb,
                 "pipelined modes: GiB one rank may use (0: train_gcn's default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--device", f.device, "train_gcn's --device: cpu, or cuda for every rank's GPU")
      ->capture_default_str();
  app.add_option("--gpu-comm", f.gpu_comm,
                 "train_gcn's --gpu-comm with --device cuda: nccl (a GPU per rank) or mpi (ranks "
                 "may share a GPU)")
      ->check(CLI::IsMember({"nccl", "mpi"}))
      ->capture_default_str();
  app.add_option("--json", f.json_file, "also write the JSON lines to this file");
  app.add_option("--csv", f.csv_file,
                 "write depth,mode,bytes_per_epoch,model_bytes_per_epoch,... for "
                 "scripts/plot_pipeline.py");
  app.add_option("--tmpdir", f.tmpdir,
                 "where the stores, summaries and logs go (a fresh subdirectory, removed at the "
                 "end; default: the system temp directory)");
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::bench_main<tessera::Flags>(
      argc, argv, "bench_pipeline",
      "graph, pipeline and hybrid parallelism across model depths: bytes per epoch against "
      "the traffic model, epoch time, memory and accuracy (one JSON line per run, then tables)",
      tessera::add_flags, tessera::run);
}
