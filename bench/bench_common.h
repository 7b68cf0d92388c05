// SPDX-License-Identifier: Apache-2.0
// Shared by the benchmark programs: their main() (CLI11 parsing, then the benchmark; any
// exception becomes "NAME: error: ..." and exit status 1), a scratch directory removed with its
// contents at the end, JSON lines on stdout, number formatting, and running a child process
// (mpiexec, partition_graph) with its output captured.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/build_info.h"
#include "core/cpu/dispatch.h"

namespace tessera {

template <class Flags, class AddFlags, class Run>
int bench_main(int argc, char** argv, const char* name, const std::string& description,
               AddFlags add_flags, Run run) {
  cpu::use_best_blas_core(argv);  // the GEMM kernels the CPU runs best, as train_gcn's
  CLI::App app{std::string(name) + ": " + description};
  app.set_version_flag("--version", std::string(name) + ", " + build_text());
  Flags flags;
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
  }
  return 1;
}

// A directory made with mkdtemp under `parent`, removed with everything in it on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::filesystem::path& parent);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// One JSON object per line on stdout as each measurement finishes; also kept for --json.
class JsonLines {
 public:
  void emit(const char* bench, const nlohmann::ordered_json& fields);
  const std::string& all() const { return all_; }

 private:
  std::string all_;
};

inline constexpr double kMB = 1e6;  // decimal units throughout, as STREAM reports them
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// a / b, or NaN when b is not positive.
inline double ratio(double a, double b) { return b > 0 ? a / b : kNaN; }
// value with `digits` decimals, or "-" for NaN.
std::string fixed(double value, int digits);
std::string read_text(const std::filesystem::path& path);
std::string join(const std::vector<std::string>& words);  // words separated by spaces
// A child program's path: the environment variable `name` when set (binaries moved elsewhere,
// as in the GPU pack), else `built` (where this build put it).
std::string program_path(const char* name, const char* built);

// Runs `argv` (argv[0] a path) with `env` ("NAME=value") added to the environment, its stdout
// and stderr in log + ".out" / ".err"; returns the wall seconds. When it does not exit 0, prints
// "<program>: this command ..." with the command and its output, and throws.
double run_child(const char* program, const std::vector<std::string>& argv,
                 const std::vector<std::string>& env, const std::filesystem::path& log);
// The environment of a training child with `threads` OpenMP threads per rank (BLAS single-threaded
// inside them).
std::vector<std::string> child_env(int threads);
// 1-minute load average of the machine (-1 when unknown).
double load_average();
// A JSON number, or null for NaN.
nlohmann::ordered_json number(double v);

// Epoch figures from a train_gcn --metrics file, the first `warmup_epochs` epochs of every run
// left out of the medians (the first run's first epoch is kept as first_epoch_s).
struct EpochTimes {
  double epoch_s = kNaN, epoch_min_s = kNaN, epoch_max_s = kNaN, first_epoch_s = kNaN;
  double comm_s = kNaN, hidden_s = kNaN;  // medians of the means over ranks
  // Evaluation passes (eval_s of the evaluated epochs): run 0's first, and the median of the
  // others (NaN when there is none).
  double first_eval_s = kNaN, eval_s = kNaN;
};
EpochTimes read_epoch_times(const std::filesystem::path& metrics, int warmup_epochs);

}  // namespace tessera
