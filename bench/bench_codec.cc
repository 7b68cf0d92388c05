// SPDX-License-Identifier: Apache-2.0
// bench_codec: the message codecs (comm/codec.h). 1. Kernels: encode and decode throughput of
// every codec on R x F random normal rows (GB/s of f32 data), the compression ratio and the
// largest decoding error relative to each row's range. 2. Training: the dataset is partitioned
// once (METIS, K parts), then mpiexec -n K train_gcn runs once per codec (R seeds each); per
// codec the halo bytes per epoch, their ratio to none's, epoch / encode / decode times and the
// final test accuracy (mean ± std over the runs) against none's. --csv writes the points of the
// accuracy-vs-bytes figure (scripts/plot_codecs.py).
#include <CLI/CLI.hpp>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "comm/codec.h"
#include "core/error.h"
#include "core/tensor.h"
#include "engine/system.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr int kKernelRepeats = 5;  // timed, after one warm-up

struct Flags {
  // Kernels.
  std::int64_t rows = 100000;
  std::int64_t features = 256;
  int threads = 2;
  // Training.
  std::string dataset = "synth:arxiv-like";
  std::vector<std::string> codecs = codec_option_names();
  int ranks = 4;
  int epochs = 50;
  int runs = 3;
  std::int64_t hidden = 256;
  int layers = 3;
  int cores = 2;
  double bit_budget = 4;
  // Output.
  std::string json_file;
  std::string csv_file;
  std::string tmpdir;
};


// ---- 1. kernels ----

struct KernelRow {
  CodecKind kind = CodecKind::None;
  double encode_s = 0, decode_s = 0;  // medians
  double encoded_bytes = 0, raw_bytes = 0;
  double max_rel_error = 0;  // max over rows of max |decoded - x| / (max - min of the row)
};

KernelRow measure_kernel(CodecKind kind, const Tensor& x, std::span<const NodeId> src,
                         std::span<const GlobalId> ids) {
  const std::int64_t r = x.rows(), f = x.cols();
  KernelRow row;
  row.kind = kind;
  row.raw_bytes = 4.0 * double(r) * double(f);
  std::vector<std::byte> buffer(static_cast<std::size_t>(r) * encoded_row_bytes(kind, f));
  row.encoded_bytes = double(buffer.size());
  Tensor decoded(r, f);
  std::vector<double> enc, dec;
  for (int rep = 0; rep <= kKernelRepeats; ++rep) {
    const CodecNoise noise{1234, std::uint64_t(rep), 0, RngPurpose::CodecForward};
    Stopwatch watch;
    encode_rows(kind, buffer, x, src, ids, noise);
    const double e = watch.seconds();
    Stopwatch watch2;
    decode_rows(kind, decoded, 0, r, buffer);
    const double d = watch2.seconds();
    if (rep > 0) {  // rep 0: warm-up
      enc.push_back(e);
      dec.push_back(d);
    }
  }
  row.encode_s = median(enc);
  row.decode_s = median(dec);
  const float* a = x.data<float>();
  const float* b = decoded.data<float>();
  double worst = 0;
#pragma omp parallel for reduction(max : worst) schedule(static)
  for (std::int64_t i = 0; i < r; ++i) {
    float lo = a[i * f], hi = a[i * f];
    double err = 0;
    for (std::int64_t j = 0; j < f; ++j) {
      lo = std::min(lo, a[i * f + j]);
      hi = std::max(hi, a[i * f + j]);
      err = std::max(err, double(std::fabs(b[i * f + j] - a[i * f + j])));
    }
    if (hi > lo) worst = std::max(worst, err / double(hi - lo));
  }
  row.max_rel_error = worst;
  return row;
}

std::vector<KernelRow> run_kernels(const Flags& flags, JsonLines& out) {
  omp_set_num_threads(flags.threads);
  const std::int64_t r = flags.rows, f = flags.features;
  std::fprintf(stderr, "[bench_codec] kernels: %lld x %lld rows, %d threads\n",
               static_cast<long long>(r), static_cast<long long>(f), flags.threads);
  Tensor x(r, f);
  {
    std::mt19937_64 gen(42);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    float* p = x.data<float>();
    for (std::int64_t i = 0; i < r * f; ++i) p[i] = normal(gen);
  }
  std::vector<NodeId> src(static_cast<std::size_t>(r));
  std::vector<GlobalId> ids(static_cast<std::size_t>(r));
  for (std::int64_t i = 0; i < r; ++i) {
    src[std::size_t(i)] = static_cast<NodeId>(i);
    ids[std::size_t(i)] = i;
  }
  std::vector<KernelRow> rows;
  for (CodecKind kind : {CodecKind::None, CodecKind::Bf16, CodecKind::Fp16, CodecKind::Int8,
                         CodecKind::Int4, CodecKind::Int2}) {
    KernelRow row = measure_kernel(kind, x, src, ids);
    out.emit("codec_kernel",
             {{"codec", std::string(to_string(kind))}, {"rows", r}, {"features", f},
              {"threads", flags.threads}, {"repeats", kKernelRepeats},
              {"encode_s_median", row.encode_s}, {"decode_s_median", row.decode_s},
              {"encode_gb_per_s", row.raw_bytes / row.encode_s / 1e9},
              {"decode_gb_per_s", row.raw_bytes / row.decode_s / 1e9},
              {"encoded_bytes", row.encoded_bytes}, {"raw_bytes", row.raw_bytes},
              {"compression", row.encoded_bytes / row.raw_bytes},
              {"max_rel_error", row.max_rel_error}});
    rows.push_back(row);
  }
  return rows;
}

void print_kernel_table(const Flags& flags, const std::vector<KernelRow>& rows) {
  std::printf("\n## Codec kernels (%lld x %lld f32 rows, random normal, %d threads; median of %d "
              "after 1 warm-up)\n\n",
              static_cast<long long>(flags.rows), static_cast<long long>(flags.features),
              flags.threads, kKernelRepeats);
  std::printf("| codec | encode GB/s | decode GB/s | encode ms | decode ms | encoded / raw | max "
              "abs error / row range |\n");
  std::printf("|---|--:|--:|--:|--:|--:|--:|\n");
  for (const KernelRow& r : rows) {
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.4f | %.2e |\n",
                std::string(to_string(r.kind)).c_str(), r.raw_bytes / r.encode_s / 1e9,
                r.raw_bytes / r.decode_s / 1e9, 1e3 * r.encode_s, 1e3 * r.decode_s,
                r.encoded_bytes / r.raw_bytes, r.max_rel_error);
  }
}

// ---- 2. training ----

struct TrainRow {
  std::string codec;
  double halo_forward = 0, halo_backward = 0, raw_forward = 0, raw_backward = 0;
  double epoch_s = 0, encode_s = 0, decode_s = 0, wall_s = 0;
  double acc = 0, acc_std = 0;
  std::vector<double> per_run_acc;
  double ratio_vs_none = kNaN, acc_diff_points = kNaN;

  double halo() const { return halo_forward + halo_backward; }
  double raw() const { return raw_forward + raw_backward; }
};

int threads_per_rank(const Flags& f) { return std::max(1, f.cores / f.ranks); }


std::string budget_text(double b) {
  std::ostringstream s;
  s << b;
  return s.str();
}

TrainRow train_one(const Flags& flags, const std::string& codec, const fs::path& store,
                   const fs::path& scratch) {
  const fs::path summary = scratch / ("train-" + codec + ".summary.json");
  const std::string epochs = std::to_string(flags.epochs);
  std::vector<std::string> argv = {
      MPIEXEC_PATH, MPIEXEC_NUMPROC_FLAG, std::to_string(flags.ranks), TRAIN_GCN_PATH,
      "--partitions", store.string(), "--codec", codec, "--epochs", epochs, "--eval-every",
      epochs, "--runs", std::to_string(flags.runs), "--hidden-channels",
      std::to_string(flags.hidden), "--num-layers", std::to_string(flags.layers), "--threads",
      std::to_string(threads_per_rank(flags)), "--quiet", "--summary", summary.string()};
  if (codec == "adaptive") argv.insert(argv.end(), {"--bit-budget", budget_text(flags.bit_budget)});
  std::fprintf(stderr, "[bench_codec] training with codec %s (%d ranks x %d threads)\n",
               codec.c_str(), flags.ranks, threads_per_rank(flags));
  TrainRow row;
  row.codec = codec;
  row.wall_s = run_child("bench_codec", argv, child_env(threads_per_rank(flags)), scratch / ("train-" + codec));
  const Json s = Json::parse(read_text(summary));
  const Json& bytes = s.at("comm_bytes_per_epoch");
  const Json& raw = s.at("comm_bytes_per_epoch_raw");
  row.halo_forward = bytes.at("halo_forward").get<double>();
  row.halo_backward = bytes.at("halo_backward").get<double>();
  row.raw_forward = raw.at("halo_forward").get<double>();
  row.raw_backward = raw.at("halo_backward").get<double>();
  row.epoch_s = s.at("epoch_s_median").get<double>();
  row.encode_s = s.at("encode_s").get<double>();
  row.decode_s = s.at("decode_s").get<double>();
  row.acc = s.at("final_test_acc").get<double>();
  row.acc_std = s.at("final_test_acc_std").get<double>();
  for (const Json& r : s.at("per_run"))
    row.per_run_acc.push_back(r.at("final_test_acc").get<double>());
  return row;
}

Json train_json(const Flags& flags, const TrainRow& r) {
  return {{"dataset", flags.dataset}, {"ranks", flags.ranks},
          {"threads_per_rank", threads_per_rank(flags)}, {"codec", r.codec},
          {"bit_budget", r.codec == "adaptive" ? Json(flags.bit_budget) : Json(nullptr)},
          {"epochs", flags.epochs}, {"runs", flags.runs}, {"hidden", flags.hidden},
          {"layers", flags.layers}, {"halo_forward_bytes", r.halo_forward},
          {"halo_backward_bytes", r.halo_backward}, {"halo_bytes", r.halo()},
          {"halo_raw_bytes", r.raw()}, {"halo_vs_none", number(r.ratio_vs_none)},
          {"epoch_s_median", r.epoch_s}, {"encode_s", r.encode_s}, {"decode_s", r.decode_s},
          {"final_test_acc", r.acc}, {"final_test_acc_std", r.acc_std},
          {"final_test_acc_per_run", r.per_run_acc},
          {"acc_diff_vs_none_points", number(r.acc_diff_points)}, {"train_wall_s", r.wall_s}};
}

void print_train_table(const Flags& flags, const std::vector<TrainRow>& rows) {
  std::printf("\n## Training (%s, %d ranks x %d threads, METIS; GCN %d layers, hidden %lld; %d "
              "epochs x %d runs; bytes per epoch, all ranks)\n\n",
              flags.dataset.c_str(), flags.ranks, threads_per_rank(flags), flags.layers,
              static_cast<long long>(flags.hidden), flags.epochs, flags.runs);
  std::printf("| codec | halo MB/epoch | vs none | raw MB/epoch | epoch ms | encode ms | decode ms "
              "| final test acc %% | vs none (points) |\n");
  std::printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (const TrainRow& r : rows) {
    std::string name = r.codec;
    if (r.codec == "adaptive") name += " (budget " + budget_text(flags.bit_budget) + ")";
    const std::string diff =
        std::isnan(r.acc_diff_points)
            ? "-"
            : std::string(r.acc_diff_points >= 0 ? "+" : "") + fixed(r.acc_diff_points, 2);
    std::printf("| %s | %.2f | %s | %.2f | %.1f | %.2f | %.2f | %.2f ± %.2f | %s |\n",
                name.c_str(), r.halo() / kMB, fixed(r.ratio_vs_none, 4).c_str(), r.raw() / kMB,
                1e3 * r.epoch_s, 1e3 * r.encode_s, 1e3 * r.decode_s, 100 * r.acc,
                100 * r.acc_std, diff.c_str());
  }
}

void compare_to_none(std::vector<TrainRow>& rows) {
  const auto none =
      std::find_if(rows.begin(), rows.end(), [](const TrainRow& r) { return r.codec == "none"; });
  if (none == rows.end()) return;
  for (TrainRow& r : rows) {
    r.ratio_vs_none = ratio(r.halo(), none->halo());
    r.acc_diff_points = 100.0 * (r.acc - none->acc);
  }
}

std::string csv_text(const std::vector<TrainRow>& rows) {
  std::string text = "codec,bytes_per_epoch,ratio,accuracy,accuracy_std\n";
  char buf[256];
  for (const TrainRow& r : rows) {
    std::snprintf(buf, sizeof buf, "%s,%.0f,%s,%.6f,%.6f\n", r.codec.c_str(), r.halo(),
                  std::isnan(r.ratio_vs_none) ? "" : fixed(r.ratio_vs_none, 6).c_str(), r.acc,
                  r.acc_std);
    text += buf;
  }
  return text;
}

int run(Flags flags) {
  for (const std::string& c : flags.codecs) {
    if (c != "adaptive") (void)parse_codec(c);  // InvalidArgument for an unknown name, up front
  }
  Stopwatch total;
  JsonLines out;
  const std::vector<KernelRow> kernels = run_kernels(flags, out);
  const double kernel_s = total.seconds();

  const ScratchDir scratch(flags.tmpdir.empty() ? fs::temp_directory_path()
                                                : fs::path(flags.tmpdir));
  const fs::path store = scratch.path() / "store";
  std::fprintf(stderr, "[bench_codec] partitioning %s into %d parts (METIS)\n",
               flags.dataset.c_str(), flags.ranks);
  const double partition_s =
      run_child("bench_codec", {PARTITION_GRAPH_PATH, "--dataset", flags.dataset, "--parts",
                 std::to_string(flags.ranks), "--partition", "metis", "--out", store.string(),
                 "--quiet"},
                child_env(threads_per_rank(flags)), scratch.path() / "partition");
  std::vector<TrainRow> rows;
  for (const std::string& codec : flags.codecs)
    rows.push_back(train_one(flags, codec, store, scratch.path()));
  compare_to_none(rows);
  for (const TrainRow& r : rows) out.emit("codec_training", train_json(flags, r));
  out.emit("timing", {{"kernels_s", kernel_s}, {"partition_wall_s", partition_s},
                      {"total_s", total.seconds()}});

  std::printf("\n# bench_codec | kernels %.1f s, partition %.1f s, total %.1f s\n", kernel_s,
              partition_s, total.seconds());
  print_kernel_table(flags, kernels);
  print_train_table(flags, rows);
  std::printf(
      "\nNotes:\n"
      "- MB = 10^6 bytes. Halo bytes: forward + backward exchanges sent per training epoch by "
      "all ranks (the last run's, as train_gcn counts them); raw = the same rows before encoding. "
      "Backward uses the same codec as forward.\n"
      "- Epoch / encode / decode ms: medians over every epoch of every run (encode and decode: "
      "mean over ranks). Accuracy: final test accuracy, mean ± std over the runs.\n"
      "- Kernel GB/s: f32 bytes (rows x features x 4) per second; the error column is a sanity "
      "check (stochastic rounding: below one quantisation step).\n");
  std::fflush(stdout);
  if (!flags.json_file.empty()) write_file_atomic(flags.json_file, out.all());
  if (!flags.csv_file.empty()) write_file_atomic(flags.csv_file, csv_text(rows));
  return 0;
}

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--rows", f.rows, "kernel table: rows R")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--features", f.features, "kernel table: features F")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", f.threads, "kernel table: OpenMP threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--dataset", f.dataset, "training: dataset spec (synth:PRESET, .h5, OGB dir)")
      ->capture_default_str();
  app.add_option("--codecs", f.codecs, "training: codecs (none bf16 fp16 int8 int4 int2 adaptive)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--ranks", f.ranks, "training: MPI ranks K")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  app.add_option("--epochs", f.epochs, "training: epochs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--runs", f.runs, "training: runs (seeds) per codec")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--hidden-channels", f.hidden, "training: GCN hidden width")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str();
  app.add_option("--num-layers", f.layers, "training: GCN layers")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--cores", f.cores, "training: cores to share, max(1, cores / K) threads per rank")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--bit-budget", f.bit_budget, "training: adaptive codec's mean bits per value")
      ->capture_default_str();
  app.add_option("--json", f.json_file, "also write the JSON lines to this file");
  app.add_option("--csv", f.csv_file, "write codec,bytes_per_epoch,ratio,accuracy,accuracy_std");
  app.add_option("--tmpdir", f.tmpdir,
                 "where the store, summaries and logs go (a fresh subdirectory, removed at the "
                 "end; default: the system temp directory)");
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::bench_main<tessera::Flags>(
      argc, argv, "bench_codec",
      "codec kernels (throughput, ratio, error) and training with each codec (bytes, time, "
      "accuracy); one JSON line per measurement, then tables",
      tessera::add_flags, tessera::run);
}
