// SPDX-License-Identifier: Apache-2.0
// Metrics lines, summary JSON and progress text for training runs.
#include "engine/run_report.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <variant>

#include "core/cpu/dispatch.h"
#include "core/error.h"
#include "engine/option_table.h"
#include "engine/system.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

std::vector<double> collect(const std::vector<RunResult>& results, double RunResult::*field) {
  std::vector<double> values;
  for (const RunResult& r : results) values.push_back(r.*field);
  return values;
}

// One per-epoch series of every run, concatenated.
std::vector<double> every_epoch(const std::vector<RunResult>& results,
                                std::vector<double> RunResult::*series) {
  std::vector<double> values;
  for (const RunResult& r : results) {
    values.insert(values.end(), (r.*series).begin(), (r.*series).end());
  }
  return values;
}

std::string percent(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%6.2f%%", 100.0 * value);
  return buf;
}

Json bytes_json(const TrafficBytes& bytes) {
  Json out;
  for (int c = 0; c < static_cast<int>(TrafficCategory::Count); ++c) {
    out[std::string(to_string(static_cast<TrafficCategory>(c)))] = bytes[c];
  }
  return out;
}

// The summary's figures of every run, named as OGB's Logger prints them: highest train and valid
// over the evaluated epochs, train and test at the epoch of the highest valid ("final" in OGB's
// sense), and the last evaluated epoch's.
constexpr std::pair<const char*, double RunResult::*> kOgbFigures[] = {
    {"highest_train", &RunResult::highest_train},
    {"highest_valid", &RunResult::best_valid},
    {"final_train", &RunResult::train_at_best_valid},
    {"final_test", &RunResult::test_at_best_valid},
    {"last_train", &RunResult::final_train},
    {"last_valid", &RunResult::final_valid},
    {"last_test", &RunResult::final_test}};
// The names of 0.1 (deprecated).
constexpr std::pair<const char*, double RunResult::*> kDeprecatedFigures[] = {
    {"best_valid_acc", &RunResult::best_valid},
    {"test_acc_at_best_valid", &RunResult::test_at_best_valid},
    {"final_test_acc", &RunResult::final_test}};

std::uint64_t halo_bytes(const TrafficBytes& bytes) {
  return bytes[static_cast<int>(TrafficCategory::HaloForward)] +
         bytes[static_cast<int>(TrafficCategory::HaloBackward)];
}

// The partitioning: method, and (when this rank knows them) its statistics.
Json partition_json(const RunInfo& info) {
  Json partition;
  partition["method"] = info.partition_method;
  if (info.partition) {
    const PartitionStats& p = *info.partition;
    partition["edge_cut"] = p.edge_cut;
    partition["halo_nodes"] = p.halo_nodes_total;
    partition["halo_nodes_per_part"] = p.halo_nodes;
    partition["owned_nodes_per_part"] = p.owned_nodes;
    partition["replication_factor"] = p.replication_factor;
    partition["imbalance"] = p.node_imbalance;
    partition["train_imbalance"] = p.train_imbalance;
    partition["seconds"] = p.seconds;
  }
  return partition;
}

// One run's results.
Json run_json(const RunResult& r) {
  Json one;
  one["run"] = r.run;
  one["seed"] = r.seed;
  one["best_epoch"] = r.best_epoch;
  one["epochs"] = r.epoch_seconds.size();  // fewer than --epochs after early stopping
  for (const auto& [key, field] : kOgbFigures) one[key] = r.*field;
  one["best_valid_acc"] = r.best_valid;
  one["test_acc_at_best_valid"] = r.test_at_best_valid;
  one["final_train_acc"] = r.final_train;
  one["final_valid_acc"] = r.final_valid;
  one["final_test_acc"] = r.final_test;
  one["final_loss"] = r.final_loss;
  one["epoch_s_median"] = median(r.epoch_seconds);
  one["comm_s_median"] = median(r.comm_seconds);
  one["comm_hidden_s_median"] = median(r.hidden_seconds);
  one["comm_bytes_per_epoch"] = bytes_json(r.bytes_per_epoch);
  one["comm_bytes_per_epoch_raw"] = bytes_json(r.raw_bytes_per_epoch);
  return one;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path, const std::string& metric,
                             ParallelInfo parallel)
    : path_(path), metric_(metric), parallel_(std::move(parallel)) {
  if (path_.empty()) return;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  TESSERA_CHECK(fd_ >= 0, Io, "--metrics: cannot open '", path_,
                "' for writing: ", std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!path_.empty() && !committed_) {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
}

void MetricsWriter::write(const EpochRecord& r) {
  if (path_.empty()) return;
  Json line;
  line["run"] = r.run;
  line["epoch"] = r.epoch;
  line["loss"] = r.loss;
  line["metric"] = metric_;
  if (r.evaluated) {
    line["train_acc"] = r.train_metric;
    line["valid_acc"] = r.valid_metric;
    line["test_acc"] = r.test_metric;
    line["valid_loss"] = r.valid_loss;
  } else {
    line["train_acc"] = nullptr;
    line["valid_acc"] = nullptr;
    line["test_acc"] = nullptr;
    line["valid_loss"] = nullptr;
  }
  line["epoch_s"] = r.epoch_s;
  line["eval_s"] = r.eval_s;
  line["comm_s"] = r.comm_s;
  line["comm_hidden_s"] = r.comm_hidden_s;
  line["comm_bytes"] = bytes_json(r.bytes);
  line["comm_bytes_raw"] = bytes_json(r.raw_bytes);
  line["encode_s"] = r.encode_s;
  line["decode_s"] = r.decode_s;
  line["parallel"] = parallel_.mode;
  line["stages"] = parallel_.stages;
  line["chunks"] = parallel_.chunks;
  if (!r.peak_rss_bytes.empty()) {
    line["peak_rss_bytes_max"] = *std::max_element(r.peak_rss_bytes.begin(), r.peak_rss_bytes.end());
    line["peak_rss_bytes_per_rank"] = r.peak_rss_bytes;
  }
  if (!r.bit_plan.empty()) line["bit_plan"] = r.bit_plan;
  const std::string text = line.dump() + '\n';
  TESSERA_CHECK(write_all(fd_, text.data(), text.size()), Io, "--metrics: writing '", path_,
                "' failed: ", std::strerror(errno));
}

void MetricsWriter::commit() {
  if (fd_ < 0) return;
  const int status = ::close(fd_);
  fd_ = -1;
  TESSERA_CHECK(status == 0, Io, "--metrics: closing '", path_, "' failed: ", std::strerror(errno));
  committed_ = true;
}

std::string summary_json(const RunInfo& info, const std::vector<RunResult>& results) {
  const TrainConfig& c = *info.config;
  const DatasetInfo& d = *info.dataset;
  const GraphTotals& t = *info.totals;
  Json s;
  s["dataset_name"] = d.name;
  s["nodes"] = d.num_nodes;
  s["edges"] = d.num_edges;
  s["graph_edges"] = t.operator_nnz;
  s["features"] = d.num_features;
  s["outputs"] = d.num_outputs();
  s["train_nodes"] = t.train_nodes;
  s["valid_nodes"] = t.valid_nodes;
  s["test_nodes"] = t.test_nodes;
  s["metric"] = d.eval_metric;
  for (const auto& [key, value] : summary_values(c))
    std::visit([&, &key = key](const auto& v) { s[key] = v; }, value);
  s["parallel"] = info.parallel.mode;
  s["ranks"] = info.ranks;
  s["graph_parts"] = info.parallel.parts;
  s["stages"] = info.parallel.stages;
  s["chunks"] = info.parallel.chunks;
  s["stage_first_layer"] = info.parallel.stage_first_layer;
  s["partition"] = partition_json(info);
  // OGB's Logger's figures (mean and sample std over runs), then the last epoch's.
  for (const auto& [key, field] : kOgbFigures) {
    const std::vector<double> v = collect(results, field);
    s[key] = mean(v);
    s[std::string(key) + "_std"] = stddev(v);
  }
  // The keys of 0.1, kept for one release (CHANGELOG.md): "final" there meant the last epoch.
  for (const auto& [key, field] : kDeprecatedFigures) {
    const std::vector<double> v = collect(results, field);
    s[key] = mean(v);
    s[std::string(key) + "_std"] = stddev(v);
  }
  s["final_loss"] = results.empty() ? 0.0 : results.back().final_loss;
  Json per_run = Json::array();
  for (const RunResult& r : results) per_run.push_back(run_json(r));
  s["per_run"] = std::move(per_run);
  // Medians over the epochs of all runs.
  s["epoch_s_median"] = median(every_epoch(results, &RunResult::epoch_seconds));
  s["comm_s"] = median(every_epoch(results, &RunResult::comm_seconds));
  s["comm_hidden_s"] = median(every_epoch(results, &RunResult::hidden_seconds));
  s["comm_bytes_per_epoch"] =
      bytes_json(results.empty() ? TrafficBytes{} : results.back().bytes_per_epoch);
  s["comm_bytes_per_epoch_raw"] =
      bytes_json(results.empty() ? TrafficBytes{} : results.back().raw_bytes_per_epoch);
  s["encode_s"] = median(every_epoch(results, &RunResult::encode_seconds));
  s["decode_s"] = median(every_epoch(results, &RunResult::decode_seconds));
  s["load_s"] = info.load_s;
  s["node_order_s"] = info.node_order_s;
  s["setup_s"] = info.setup_s;
  s["total_s"] = info.total_s;
  s["peak_rss_bytes"] = peak_rss_bytes();
  s["peak_rss_bytes_max"] = info.peak_rss_bytes_max;
  s["peak_rss_bytes_sum"] = info.peak_rss_bytes_sum;
  s["peak_rss_bytes_per_rank"] = info.peak_rss_bytes_per_rank;
  const Provenance& p = info.provenance;
  s["provenance"] = {{"version", p.version},
                     {"git_commit", p.git_commit},
                     {"command", p.command},
                     {"hosts", p.hosts},
                     {"slurm_job_id", p.slurm_job_id},
                     {"slurm_array_task", p.slurm_array_task},
                     {"cpu_kernels", cpu::cpu_kernels_description()}};  // rank 0's
  return s.dump(2) + "\n";
}

std::string progress_line(const EpochRecord& r, const std::string& metric) {
  char buf[320];
  int used = 0;
  if (r.evaluated) {
    const char* name = metric == "acc" ? "" : " (rocauc)";
    used = std::snprintf(buf, sizeof buf,
                         "Run %02d | Epoch %04d | Loss %.4f | Train %s | Valid %s | Test %s%s | "
                         "%.1f ms",
                         r.run + 1, r.epoch, r.loss, percent(r.train_metric).c_str(),
                         percent(r.valid_metric).c_str(), percent(r.test_metric).c_str(), name,
                         1e3 * r.epoch_s);
  } else {
    used = std::snprintf(buf, sizeof buf, "Run %02d | Epoch %04d | Loss %.4f | %.1f ms", r.run + 1,
                         r.epoch, r.loss, 1e3 * r.epoch_s);
  }
  const std::uint64_t halo = halo_bytes(r.bytes);
  if (halo > 0 && used > 0 && used < static_cast<int>(sizeof buf)) {
    const double hidden = r.comm_s > 0 ? 100.0 * r.comm_hidden_s / r.comm_s : 0.0;
    std::snprintf(buf + used, sizeof buf - used, " | comm %.1f ms (%.0f%% hidden) | halo %.2f MB",
                  1e3 * r.comm_s, hidden, 1e-6 * static_cast<double>(halo));
  }
  return buf;
}

namespace {

// OGB's Logger's four lines over `runs`: one run's figures, or (all) the mean and sample std of
// several ("nan" for one run, as torch's std of one value).
std::string ogb_block(const std::vector<RunResult>& runs, bool all) {
  auto line = [&](const char* label, double RunResult::*field) {
    const std::vector<double> v = collect(runs, field);
    char buf[96];
    if (!all) {
      std::snprintf(buf, sizeof buf, "%s %.2f\n", label, 100.0 * v.front());
    } else if (v.size() > 1) {
      std::snprintf(buf, sizeof buf, "%s %.2f ± %.2f\n", label, 100.0 * mean(v), 100.0 * stddev(v));
    } else {
      std::snprintf(buf, sizeof buf, "%s %.2f ± nan\n", label, 100.0 * mean(v));
    }
    return std::string(buf);
  };
  return line("Highest Train:", &RunResult::highest_train) +
         line("Highest Valid:", &RunResult::best_valid) +
         line("  Final Train:", &RunResult::train_at_best_valid) +
         line("   Final Test:", &RunResult::test_at_best_valid);
}

std::string mean_std(const std::vector<RunResult>& runs, double RunResult::*field) {
  const std::vector<double> v = collect(runs, field);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f ± %.2f", 100.0 * mean(v), 100.0 * stddev(v));
  return buf;
}

}  // namespace

std::string run_report(const RunResult& run) {
  char head[24];
  std::snprintf(head, sizeof head, "Run %02d:\n", run.run + 1);
  return head + ogb_block({run}, false);
}

std::string final_report(const std::vector<RunResult>& results, const std::string& metric) {
  std::string out = "All runs:\n" + ogb_block(results, true);
  out += "(" + metric + ", " + std::to_string(results.size()) +
         (results.size() == 1 ? " run" : " runs") +
         "; Final Train and Final Test are at the epoch of the highest Valid, i.e. Test at best "
         "Valid. At the last epoch: Train " +
         mean_std(results, &RunResult::final_train) + ", Valid " +
         mean_std(results, &RunResult::final_valid) + ", Test " +
         mean_std(results, &RunResult::final_test) + ")\n";
  return out;
}

}  // namespace tessera
