// SPDX-License-Identifier: Apache-2.0
// bench_graph_parallel: graph-parallel GCN training across rank counts and partitioners. Per
// dataset, K and partitioner it runs partition_graph (K > 1), then mpiexec -n K train_gcn on the
// store (K = 1: train_gcn on the dataset), and reads the summary and per-epoch metrics: partition
// quality, halo and all-reduce bytes per epoch, median epoch, communication time and its hidden
// share, peak RSS per rank, and the halo bytes against the traffic model of DESIGN.md. With
// several --node-orders, each configuration trains once per order, back to back, and a table
// compares their epochs (the first order's rows fill the other tables).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "engine/system.h"
#include "engine/traffic_model.h"
#include "partition/node_order.h"
#include "partition/partition_plan.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr int kWarmupEpochs = 1;  // run before the timed epochs; excluded from every median

struct Flags {
  std::vector<std::string> datasets = {"synth:arxiv-like"};
  std::vector<int> ranks = {1, 2, 4};
  std::vector<std::string> methods = {"metis", "random"};
  std::vector<std::string> orders = {"rcm"};
  int epochs = 5;
  std::int64_t hidden = 256;
  int layers = 3;
  int cores = 2;
  std::string keep_stores;
  std::string json_file;
  std::string tmpdir;
};

// ---- one configuration: partition, train, read the results ----

struct Config {
  std::string dataset;
  int ranks = 1;
  std::string method = "none";  // metis | random | block; none for one rank
  int threads = 1;              // per rank
  std::string order = "rcm";    // --node-order
};

struct PartitionResult {
  std::int64_t edge_cut = 0, halo_nodes = 0;
  double seconds = kNaN;  // the partitioner alone (meta.json); NaN: one rank, no partition
  double wall_s = kNaN;   // partition_graph: load, partition, write the store (NaN: reused)
};

// Widths summed over layers of what goes through the propagator, hence of the halo rows
// (engine/traffic_model.h says which width each layer sends in each direction).
struct WidthSums {
  std::int64_t forward = 0, backward = 0;
};

struct Row {
  Config config;
  PartitionResult partition;
  std::int64_t nodes = 0, f_in = 0, outputs = 0;
  double halo_forward = 0, halo_backward = 0, all_reduce = 0;  // bytes per epoch, all ranks
  WidthSums widths;
  EpochTimes times;  // from the metrics file, warm-up epochs left out
  double peak_rss_max = 0, peak_rss_sum = 0;
  double load_s = 0, setup_s = 0, train_wall_s = 0, test_acc = 0;
  double rss_vs_one_rank = kNaN, speedup = kNaN, halo_vs_random = kNaN;

  double halo_bytes() const { return halo_forward + halo_backward; }
  double model_forward() const { return 4.0 * double(partition.halo_nodes) * widths.forward; }
  double model_backward() const { return 4.0 * double(partition.halo_nodes) * widths.backward; }
};

std::string slug(const Config& c) {
  std::string name = c.dataset + "-k" + std::to_string(c.ranks) + "-" + c.method + "-" + c.order;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-') ch = '_';
  return name;
}


PartitionResult stats_of_store(const fs::path& store) {
  const Json meta = Json::parse(read_text(store / "meta.json"));
  const Json& s = meta.at("stats");
  PartitionResult r;
  r.edge_cut = s.at("edge_cut").get<std::int64_t>();
  r.halo_nodes = s.at("halo_nodes_total").get<std::int64_t>();
  r.seconds = s.at("seconds").get<double>();
  return r;
}

// Makes the store with partition_graph, or reuses one --keep-stores already holds.
PartitionResult partition(const Config& c, const fs::path& store, const fs::path& logs) {
  if (fs::exists(store / "meta.json")) {
    std::fprintf(stderr, "[bench_graph_parallel] %s: reusing the store %s\n", slug(c).c_str(),
                 store.c_str());
    return stats_of_store(store);
  }
  std::fprintf(stderr, "[bench_graph_parallel] %s: partitioning\n", slug(c).c_str());
  const double wall = run_child(
      "bench_graph_parallel",
      {PARTITION_GRAPH_PATH, "--dataset", c.dataset, "--parts", std::to_string(c.ranks),
       "--partition", c.method, "--node-order", c.order, "--out", store.string(), "--quiet"},
      child_env(c.threads), logs / (slug(c) + ".partition"));
  PartitionResult r = stats_of_store(store);
  r.wall_s = wall;
  return r;
}

std::vector<std::string> train_command(const Flags& flags, const Config& c, const fs::path& store,
                                       const fs::path& summary, const fs::path& metrics) {
  std::vector<std::string> argv;
  if (c.ranks > 1) {
    argv = {MPIEXEC_PATH, MPIEXEC_NUMPROC_FLAG, std::to_string(c.ranks), TRAIN_GCN_PATH,
            "--partitions", store.string()};
  } else {
    argv = {TRAIN_GCN_PATH, "--dataset", c.dataset, "--node-order", c.order};
  }
  // Evaluation only after the last epoch, outside the timed step.
  const std::string epochs = std::to_string(kWarmupEpochs + flags.epochs);
  argv.insert(argv.end(), {"--epochs", epochs, "--eval-every", epochs, "--hidden-channels",
                           std::to_string(flags.hidden), "--num-layers",
                           std::to_string(flags.layers), "--threads", std::to_string(c.threads),
                           "--quiet", "--summary", summary.string(), "--metrics",
                           metrics.string()});
  return argv;
}

void read_summary(Row& row, const fs::path& summary) {
  const Json s = Json::parse(read_text(summary));
  row.nodes = s.at("nodes").get<std::int64_t>();
  row.f_in = s.at("features").get<std::int64_t>();
  row.outputs = s.at("outputs").get<std::int64_t>();
  const Json& bytes = s.at("comm_bytes_per_epoch");
  row.halo_forward = bytes.at("halo_forward").get<double>();
  row.halo_backward = bytes.at("halo_backward").get<double>();
  row.all_reduce = bytes.at("all_reduce").get<double>();
  row.peak_rss_max = s.at("peak_rss_bytes_max").get<double>();
  row.peak_rss_sum = s.at("peak_rss_bytes_sum").get<double>();
  row.load_s = s.at("load_s").get<double>();
  row.setup_s = s.at("setup_s").get<double>();
  row.test_acc = s.at("final_test_acc").get<double>();
}

WidthSums width_sums(std::int64_t f_in, std::int64_t hidden, std::int64_t outputs, int layers) {
  const ExchangedWidths w = exchanged_widths(layers, f_in, hidden, outputs);
  WidthSums sums;
  for (std::int64_t width : w.forward) sums.forward += width;
  for (std::int64_t width : w.backward) sums.backward += width;
  return sums;
}

Row measure(const Flags& flags, const Config& c, const fs::path& scratch) {
  Row row;
  row.config = c;
  fs::path store;
  if (c.ranks > 1) {
    store = (flags.keep_stores.empty() ? scratch : fs::path(flags.keep_stores)) / slug(c);
    row.partition = partition(c, store, scratch);
  }
  const fs::path summary = scratch / (slug(c) + ".summary.json");
  const fs::path metrics = scratch / (slug(c) + ".metrics.jsonl");
  std::fprintf(stderr, "[bench_graph_parallel] %s: training (%d threads per rank)\n",
               slug(c).c_str(), c.threads);
  row.train_wall_s =
      run_child("bench_graph_parallel", train_command(flags, c, store, summary, metrics),
                child_env(c.threads), scratch / (slug(c) + ".train"));
  read_summary(row, summary);
  row.times = read_epoch_times(metrics, kWarmupEpochs);
  row.widths = width_sums(row.f_in, flags.hidden, row.outputs, flags.layers);
  if (c.ranks > 1 && flags.keep_stores.empty()) fs::remove_all(store);  // disk: big datasets
  return row;
}

// ---- the report ----

// "%.*f" of a value, "-" for NaN.

Json row_json(const Flags& flags, const Row& r) {
  auto number = [](double v) { return std::isnan(v) ? Json(nullptr) : Json(v); };
  const Config& c = r.config;
  return {{"dataset", c.dataset}, {"ranks", c.ranks}, {"method", c.method},
          {"node_order", c.order}, {"threads_per_rank", c.threads}, {"hidden", flags.hidden},
          {"layers", flags.layers}, {"nodes", r.nodes}, {"features", r.f_in},
          {"outputs", r.outputs}, {"warmup_epochs", kWarmupEpochs},
          {"timed_epochs", flags.epochs}, {"edge_cut", r.partition.edge_cut},
          {"halo_nodes", r.partition.halo_nodes},
          {"partition_s", number(r.partition.seconds)},
          {"partition_wall_s", number(r.partition.wall_s)},
          {"halo_forward_bytes", r.halo_forward}, {"halo_backward_bytes", r.halo_backward},
          {"all_reduce_bytes", r.all_reduce}, {"epoch_s_median", r.times.epoch_s},
          {"epoch_s_min", r.times.epoch_min_s}, {"epoch_s_max", r.times.epoch_max_s},
          {"first_epoch_s", r.times.first_epoch_s}, {"comm_s", r.times.comm_s},
          {"comm_hidden_s", r.times.hidden_s},
          {"comm_hidden_share", number(ratio(r.times.hidden_s, r.times.comm_s))},
          {"peak_rss_bytes_max", r.peak_rss_max}, {"peak_rss_bytes_sum", r.peak_rss_sum},
          {"peak_rss_vs_1rank", number(r.rss_vs_one_rank)}, {"speedup_vs_1rank", number(r.speedup)},
          {"widths_forward", r.widths.forward}, {"widths_backward", r.widths.backward},
          {"model_halo_forward_bytes", r.model_forward()},
          {"model_halo_backward_bytes", r.model_backward()},
          {"halo_forward_vs_model", number(ratio(r.halo_forward, r.model_forward()))},
          {"halo_backward_vs_model", number(ratio(r.halo_backward, r.model_backward()))},
          {"load_s", r.load_s}, {"setup_s", r.setup_s}, {"train_wall_s", r.train_wall_s},
          {"final_test_acc", r.test_acc}};
}

std::string label(const Row& r) {
  return "| " + r.config.dataset + " | " + std::to_string(r.config.ranks) + " | " +
         r.config.method + " |";
}

void print_traffic_table(const std::vector<Row>& rows) {
  std::printf("\n## Partitions and traffic (per training epoch, sent by all ranks)\n\n");
  std::printf("| dataset | K | method | edge cut | halo nodes | partition s | partition_graph s "
              "| halo fwd MB | halo bwd MB | all-reduce MB | halo metis/random |\n");
  std::printf("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (const Row& r : rows) {
    std::printf("%s %lld | %lld | %s | %s | %.2f | %.2f | %.2f | %s |\n", label(r).c_str(),
                static_cast<long long>(r.partition.edge_cut),
                static_cast<long long>(r.partition.halo_nodes),
                fixed(r.partition.seconds, 2).c_str(), fixed(r.partition.wall_s, 2).c_str(),
                r.halo_forward / kMB, r.halo_backward / kMB, r.all_reduce / kMB,
                fixed(r.halo_vs_random, 3).c_str());
  }
}

void print_time_table(const std::vector<Row>& rows) {
  std::printf("\n## Time and memory\n\n");
  std::printf("| dataset | K | method | threads/rank | epoch ms | min ms | max ms | epoch 1 ms | "
              "speedup vs 1 rank | comm ms | comm hidden ms | hidden / comm | peak RSS MB per "
              "rank (max) | vs 1 rank | RSS MB all ranks | final test acc |\n");
  std::printf("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (const Row& r : rows) {
    std::printf("%s %d | %.1f | %.1f | %.1f | %.1f | %s | %.2f | %.2f | %s | %.0f | %s | %.0f | "
                "%.4f |\n",
                label(r).c_str(), r.config.threads, 1e3 * r.times.epoch_s,
                1e3 * r.times.epoch_min_s, 1e3 * r.times.epoch_max_s, 1e3 * r.times.first_epoch_s,
                fixed(r.speedup, 2).c_str(), 1e3 * r.times.comm_s, 1e3 * r.times.hidden_s,
                fixed(ratio(r.times.hidden_s, r.times.comm_s), 2).c_str(),
                r.peak_rss_max / kMB, fixed(r.rss_vs_one_rank, 2).c_str(), r.peak_rss_sum / kMB,
                r.test_acc);
  }
}

void print_model_table(const std::vector<Row>& rows) {
  std::printf("\n## Traffic model: halo bytes = 4 B x halo nodes x Σ layers (width through "
              "the SpMM)\n\n");
  std::printf("| dataset | K | method | halo nodes | Σ width fwd | Σ width bwd | fwd MB | model "
              "MB | fwd / model | bwd MB | model MB | bwd / model | (fwd+bwd) / (2 x fwd model) "
              "|\n");
  std::printf("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (const Row& r : rows) {
    if (r.config.ranks == 1) continue;
    std::printf("%s %lld | %lld | %lld | %.2f | %.2f | %s | %.2f | %.2f | %s | %s |\n",
                label(r).c_str(), static_cast<long long>(r.partition.halo_nodes),
                static_cast<long long>(r.widths.forward),
                static_cast<long long>(r.widths.backward), r.halo_forward / kMB,
                r.model_forward() / kMB, fixed(ratio(r.halo_forward, r.model_forward()), 4).c_str(),
                r.halo_backward / kMB, r.model_backward() / kMB,
                fixed(ratio(r.halo_backward, r.model_backward()), 4).c_str(),
                fixed(ratio(r.halo_bytes(), 2.0 * r.model_forward()), 4).c_str());
  }
}

// Each configuration's epoch in every node order against its first order's.
void print_order_table(const Flags& flags, const std::vector<Row>& rows,
                       const std::vector<Row>& others) {
  if (flags.orders.size() < 2) return;
  std::printf(
      "\n## Node order (the same parts, nodes renumbered or not; trained back to back)"
      "\n\n| dataset | K | method | order | epoch ms | min ms | speed vs %s |\n"
      "|---|--:|---|---|--:|--:|--:|\n",
      flags.orders.front().c_str());
  for (const Row& first : rows) {
    auto print = [&](const Row& r) {
      std::printf("%s %s | %.1f | %.1f | %.2f |\n", label(r).c_str(), r.config.order.c_str(),
                  1e3 * r.times.epoch_s, 1e3 * r.times.epoch_min_s,
                  ratio(first.times.epoch_s, r.times.epoch_s));
    };
    print(first);
    for (const Row& r : others)
      if (r.config.dataset == first.config.dataset && r.config.ranks == first.config.ranks &&
          r.config.method == first.config.method)
        print(r);
  }
}

void print_notes(const Flags& flags) {
  std::printf(
      "\nNotes:\n"
      "- MB = 10^6 bytes. Bytes are per training step (forward, backward, all-reduce), summed "
      "over ranks; evaluation is excluded.\n"
      "- Times: %d warm-up epoch then %d timed; medians over the timed epochs. Epoch: rank 0's "
      "step, which ends in the gradient all-reduce, so it waits for the slowest rank. comm = "
      "halo exchanges (start to completion) + blocking all-reduces, mean over ranks; hidden = "
      "the halo time overlapped with aggregation. All-reduces cannot be hidden, so hidden / "
      "comm understates the halo-only share (the run does not report halo time separately).\n"
      "- Partition s: the partitioner alone; partition_graph s: the whole program (generate or "
      "load, partition, write the store; '-' when --keep-stores reused it).\n"
      "- Peak RSS: per rank, the largest over ranks; vs 1 rank = that / the 1-rank run's peak "
      "(which holds the whole dataset). Threads per rank = max(1, cores / K) with --cores %d; "
      "K above the cores oversubscribes them (busy-polling MPI ranks share cores).\n"
      "- Traffic model: forward layers exchange min(F_in, F_out) (transform-first when F_out < "
      "F_in); backward skips the first layer unless it transformed first. DESIGN.md's 2 x "
      "forward approximation is the last column.\n",
      kWarmupEpochs, flags.epochs, flags.cores);
}

void print_report(const Flags& flags, const std::vector<Row>& rows, const std::vector<Row>& others,
                  double load_start) {
  std::printf("\n# bench_graph_parallel: GCN, %d layers, hidden %lld | %d cores | 1-min load "
              "average %.2f before, %.2f after (other processes competing inflate times)\n",
              flags.layers, static_cast<long long>(flags.hidden), flags.cores, load_start,
              load_average());
  print_traffic_table(rows);
  print_time_table(rows);
  print_model_table(rows);
  print_order_table(flags, rows, others);
  print_notes(flags);
  std::fflush(stdout);
}

// ---- the run ----

// For each METIS row of one K, its halo bytes over those of the random partition at that K.
void compare_methods(std::span<Row> group, JsonLines& out) {
  const auto random = std::find_if(group.begin(), group.end(),
                                   [](const Row& r) { return r.config.method == "random"; });
  if (random == group.end()) return;
  for (Row& r : group) {
    if (r.config.method != "metis") continue;
    r.halo_vs_random = ratio(r.halo_bytes(), random->halo_bytes());
    out.emit("metis_vs_random",
             {{"dataset", r.config.dataset}, {"ranks", r.config.ranks},
              {"halo_bytes_ratio", r.halo_vs_random},
              {"edge_cut_ratio", ratio(double(r.partition.edge_cut),
                                       double(random->partition.edge_cut))},
              {"epoch_s_ratio", ratio(r.times.epoch_s, random->times.epoch_s)}});
  }
}

// Appends a row per (K, method) to `rows` as each finishes, so a failure reports the others;
// the rows of the other node orders go to `others`.
void measure_dataset(const Flags& flags, const std::string& dataset, const fs::path& scratch,
                     std::vector<Row>& rows, std::vector<Row>& others, JsonLines& out) {
  double one_rank_rss = kNaN, one_rank_epoch_s = kNaN;  // from K = 1 (ranks are sorted)
  for (int k : flags.ranks) {
    const std::size_t group_start = rows.size();
    for (const std::string& method : k == 1 ? std::vector<std::string>{"none"} : flags.methods) {
      for (const std::string& order : flags.orders) {
        Row row =
            measure(flags, {dataset, k, method, std::max(1, flags.cores / k), order}, scratch);
        const bool first = order == flags.orders.front();
        if (k == 1 && first) {
          one_rank_rss = row.peak_rss_max;
          one_rank_epoch_s = row.times.epoch_s;
        }
        row.rss_vs_one_rank = ratio(row.peak_rss_max, one_rank_rss);
        row.speedup = ratio(one_rank_epoch_s, row.times.epoch_s);
        out.emit("graph_parallel", row_json(flags, row));
        if (!first) {
          const Row& base = rows.back();
          const double epoch_ratio = ratio(row.times.epoch_s, base.times.epoch_s);
          out.emit("node_order", {{"dataset", dataset}, {"ranks", k}, {"method", method},
                                  {"order", order}, {"against", flags.orders.front()},
                                  {"epoch_s_ratio", epoch_ratio}});
        }
        (first ? rows : others).push_back(std::move(row));
      }
    }
    compare_methods(std::span<Row>(rows).subspan(group_start), out);
  }
}

int run(Flags flags) {
  std::sort(flags.ranks.begin(), flags.ranks.end());
  flags.ranks.erase(std::unique(flags.ranks.begin(), flags.ranks.end()), flags.ranks.end());
  std::vector<std::string> orders;  // each once, in the order given
  for (const std::string& o : flags.orders)
    if (std::find(orders.begin(), orders.end(), o) == orders.end()) orders.push_back(o);
  flags.orders = std::move(orders);
  if (!flags.keep_stores.empty()) fs::create_directories(flags.keep_stores);
  const double load_start = load_average();
  const ScratchDir scratch(flags.tmpdir.empty() ? fs::temp_directory_path()
                                                : fs::path(flags.tmpdir));
  JsonLines out;
  std::vector<Row> rows, others;
  try {
    for (const std::string& dataset : flags.datasets)
      measure_dataset(flags, dataset, scratch.path(), rows, others, out);
  } catch (...) {
    if (!rows.empty()) print_report(flags, rows, others, load_start);  // what finished before it
    throw;
  }
  out.emit("machine", {{"cores", flags.cores}, {"online_cores", ::sysconf(_SC_NPROCESSORS_ONLN)},
                       {"load_avg_1min_start", load_start}, {"load_avg_1min_end", load_average()}});
  print_report(flags, rows, others, load_start);
  if (!flags.json_file.empty()) write_file_atomic(flags.json_file, out.all());
  return 0;
}

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--datasets", f.datasets, "dataset specs (synth:PRESET, .h5 file, OGB dir)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--ranks", f.ranks, "rank counts K")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--methods", f.methods, "partitioners for K > 1")
      ->delimiter(',')
      ->check(CLI::IsMember(partition_method_names()))
      ->capture_default_str();
  app.add_option("--node-orders", f.orders,
                 "node orders to train each configuration in, back to back (the first fills the "
                 "main tables)")
      ->delimiter(',')
      ->check(CLI::IsMember(node_order_names()))
      ->capture_default_str();
  app.add_option("--epochs", f.epochs, "timed epochs (after 1 warm-up epoch)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--hidden-channels", f.hidden, "GCN hidden width")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str();
  app.add_option("--num-layers", f.layers, "GCN layers")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--cores", f.cores, "cores to share: max(1, cores / K) threads per rank")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--keep-stores", f.keep_stores,
                 "keep partition stores in DIR and reuse those already there");
  app.add_option("--json", f.json_file, "also write the JSON lines to this file");
  app.add_option("--tmpdir", f.tmpdir,
                 "where summaries, logs and stores go (in a fresh subdirectory, removed at the "
                 "end; default: the system temp directory)");
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::bench_main<tessera::Flags>(
      argc, argv, "bench_graph_parallel",
      "graph-parallel GCN training across rank counts and "
      "partitioners (one JSON line per configuration, then tables)",
      tessera::add_flags, tessera::run);
}
