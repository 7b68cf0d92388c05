// SPDX-License-Identifier: Apache-2.0
// train_gcn: full-graph GCN / GraphSAGE training from the command line, with flags named as in
// OGB's node-property examples, on one process or across MPI ranks (mpiexec -n K train_gcn ...:
// one METIS part per rank, halo exchange between them). A thin layer over the public API
// (tessera::Session): the flags are the option table's (tessera::option_infos()) and become
// tessera::Options. Rank 0 prints a progress line per epoch on
// stderr and the final accuracies on stdout, and writes the optional metrics and summary.
// Under Slurm (srun or mpiexec inside an allocation) the launch environment is cross-checked;
// SIGUSR1/SIGTERM stop training after a checkpoint with exit status 75 (kStoppedExitStatus),
// and a later start with the same --checkpoint-dir continues from it (apps/slurm/ has batch
// scripts).
#include <CLI/CLI.hpp>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <tessera/tessera.h>

#include "apps/cli_errors.h"

namespace {

// The flags come from the option table (tessera::option_infos(), declared once in
// include/tessera/options.h): --name VALUE for each option, the switches some have (--quiet,
// --resume, --no-resume), and the values parsed into tessera::Options after CLI11 has read them.
struct Flags {
  std::map<std::string, std::string> text;  // option name -> the value given
  std::map<std::string, bool> set;          // bool option name -> given
  std::map<std::string, bool> switched;     // switch flag -> given
};

// "--num-layers,--num_layers": a flag and OGB's spelling of it (its examples use argparse names
// with underscores).
std::string with_alias(const std::string& flag) {
  std::string alias = flag;
  for (std::size_t i = 2; i < alias.size(); ++i)
    if (alias[i] == '-') alias[i] = '_';
  return alias == flag ? flag : flag + "," + alias;
}

void add_flags(CLI::App& app, Flags& f) {
  for (const tessera::OptionInfo& o : tessera::option_infos()) {
    if (!o.flag.empty() && o.type == "bool") {
      app.add_flag(with_alias(o.flag), f.set[o.name], o.help);
    } else if (!o.flag.empty()) {
      app.add_option(with_alias(o.flag), f.text[o.name], o.help)
          ->default_str(o.default_text)
          ->type_name(o.type == "int"     ? "INT"
                      : o.type == "float" ? "FLOAT"
                                          : "TEXT");
    }
    std::vector<CLI::Option*> switches;
    for (const auto& [flag, value] : o.switches) {
      switches.push_back(app.add_flag(with_alias(flag), f.switched[flag],
                                      "(" + o.name + " = " + value + ") " + o.help));
    }
    for (CLI::Option* a : switches)
      for (CLI::Option* b : switches)
        if (a != b) a->excludes(b);
  }
}

// The options the flags give, over train_gcn's own defaults (progress lines, signal handling).
tessera::Options options_from(const Flags& f) {
  tessera::Options options;
  options.verbosity = 2;
  options.handle_signals = true;
  for (const tessera::OptionInfo& o : tessera::option_infos()) {
    if (const auto it = f.text.find(o.name); it != f.text.end() && !it->second.empty())
      tessera::set_option_text(options, o.name, it->second);
    if (const auto it = f.set.find(o.name); it != f.set.end() && it->second)
      tessera::set_option(options, o.name, true);
    for (const auto& [flag, value] : o.switches)
      if (f.switched.at(flag)) tessera::set_option_text(options, o.name, value);
  }
  return options;
}

// The settings of the run on one line, as OGB's examples print their arguments (print(args)).
std::string settings_line(const tessera::Options& options) {
  std::string line;
  for (const tessera::OptionInfo& o : tessera::option_infos()) {
    const tessera::OptionValue v = tessera::get_option(options, o.name);
    std::ostringstream text;
    if (const bool* b = std::get_if<bool>(&v))
      text << (*b ? "True" : "False");
    else if (const std::string* s = std::get_if<std::string>(&v))
      text << '\'' << *s << '\'';
    else
      std::visit([&](const auto& x) { text << x; }, v);
    line += (line.empty() ? "" : ", ") + o.name + "=" + text.str();
  }
  return "Settings(" + line + ")";
}

// Trains (or with --predict evaluates a saved model) as the flags say; returns the exit status.
// Collective.
int run(const tessera::Options& options, bool dataset_given) {
  tessera::Session session(options, MPI_COMM_WORLD);
  const bool root = session.rank() == 0;
  if (root) {
    std::printf("%s\n", settings_line(options).c_str());
    std::fflush(stdout);
  }
  // With a partition store and no --dataset, the store says which dataset it holds.
  session.load(dataset_given || options.partitions.empty() ? options.dataset : "");
  if (!options.predict.empty()) {
    const tessera::SplitScores scores = session.predict();
    if (root) {
      const char* unit = session.metric() == "acc" ? "" : " (rocauc)";
      std::printf("Predicted with %s: Train: %.2f%%, Valid: %.2f%%, Test: %.2f%%%s\n",
                  options.predict.c_str(), 100.0 * scores.train, 100.0 * scores.valid,
                  100.0 * scores.test, unit);
      std::fflush(stdout);
    }
    return 0;
  }
  const tessera::TrainResult result = session.train();
  if (root) {
    std::printf("%s", session.report().c_str());
    std::fflush(stdout);
  }
  if (!result.stopped) return 0;
  // Nothing else to write: the metrics so far are in the checkpoint, and a later start with
  // the same --checkpoint-dir continues and writes the complete files.
  if (root) {
    const char* name = result.stop_signal == SIGUSR1   ? "SIGUSR1"
                       : result.stop_signal == SIGTERM ? "SIGTERM"
                                                       : "a stop signal on another rank";
    if (result.checkpoint.empty()) {
      std::fprintf(stderr, "Stopped by %s after run %d, epoch %d; no --checkpoint-dir, so the "
                   "next start begins again\n", name, result.stop_run + 1, result.stop_epoch);
    } else {
      std::fprintf(stderr, "Stopped by %s after run %d, epoch %d; checkpoint %s (start again "
                   "with the same --checkpoint-dir to continue)\n", name, result.stop_run + 1,
                   result.stop_epoch, result.checkpoint.c_str());
    }
  }
  return tessera::kStoppedExitStatus;
}

// --plan: rank 0 plans (one process is enough; under mpiexec the others wait for its status).
int run_plan(const tessera::Options& options, std::vector<int> ranks, const std::string& json,
             int rank) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // Default: the job's ranks, or on one process the ranks the flags imply (a store's parts,
  // --parts, and --stages in the pipelined modes), then 1, 2, 4 and 8 ranks in graph mode.
  if (ranks.empty() && options.partitions.empty()) {
    const int parts = options.parts > 0 ? options.parts : 1;
    const int stages = options.stages > 0 ? options.stages : 2;
    int requested = world > 1                        ? world
                    : options.parallel == "pipeline" ? stages
                    : options.parallel == "hybrid"   ? std::max(2, parts) * stages
                                                     : parts;
    ranks.push_back(requested);
    for (const int k : {1, 2, 4, 8})
      if (k != requested) ranks.push_back(k);
  }
  int status = 0;
  std::string error;
  if (rank == 0) {
    try {
      const tessera::Plan plan = tessera::plan(options, ranks, json);
      std::printf("%s", plan.table.c_str());
      std::fflush(stdout);
    } catch (const std::invalid_argument& e) {
      error = e.what();
      status = tessera::kUsageExitStatus;
    } catch (const std::exception& e) {
      error = e.what();
      status = 1;
    }
  }
  // The other ranks wait without spinning on the cores rank 0 plans with.
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD, &request);
  for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done;)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (rank == 0 && status != 0)
    std::fprintf(stderr, "train_gcn: error: --plan: %s\n", error.c_str());
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::use_best_blas_core(argv);
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "train_gcn: error: MPI_Init_thread failed\n");
    return 1;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CLI::App app{"train_gcn: full-graph GNN training (Tessera)"};
  app.set_version_flag("--version", "train_gcn, " + tessera::build_description());
  Flags flags;
  add_flags(app, flags);
  // The pre-flight planner: the flags as for training, then the plan instead of the training.
  bool plan_only = false;
  std::vector<int> plan_ranks;
  std::string plan_json;
  app.add_flag("--plan", plan_only,
               "print the predicted peak memory per rank and bytes per epoch of this "
               "configuration and of alternatives, then exit without training (docs/planner.md)");
  app.add_option("--plan-ranks", plan_ranks,
                 "with --plan: the rank counts to plan for, comma-separated, the configuration's "
                 "first (default: the job's ranks, else those --parts and --stages imply, or a "
                 "store's parts; then 1, 2, 4 and 8)")
      ->delimiter(',')
      ->check(CLI::Range(1, 65536));
  app.add_option("--plan-json", plan_json, "with --plan: also write the plan as JSON to FILE");
  // A sweep's settings in a file: the same names as the flags (either spelling, no dashes).
  app.set_config("--config", "",
                 "read flags from FILE, TOML or INI (num_layers = 2, batch_norm = true, "
                 "dataset = \"dataset/ogbn_arxiv\"); flags given on the command line win");
  app.allow_config_extras(false);  // a misspelt name in the file is an error, not ignored
  static_assert(tessera_apps::kUsageExitStatus == tessera::kUsageExitStatus);
  int status = 0;
  try {
    app.parse(argc, argv);
    // Flag values, ranges and combinations are checked before anything starts (every rank
    // reads the same command line: the same answer everywhere, no communication).
    const tessera::Options options = options_from(flags);
    tessera::check_options(options);
    if (!plan_only && (!plan_ranks.empty() || !plan_json.empty()))
      throw CLI::ValidationError("--plan-ranks/--plan-json", "only with --plan");
    status = plan_only ? run_plan(options, plan_ranks, plan_json, rank)
                       : run(options, app.count("--dataset") > 0);
  } catch (const CLI::ConfigError& e) {
    // CLI11 names the entry but not the file.
    const std::string file = app.get_config_ptr()->as<std::string>();
    if (rank == 0)
      std::fprintf(stderr,
                   "train_gcn: error: --config %s: %s (expected the flags' names without dashes, "
                   "outside any [section])\n",
                   file.c_str(), e.what());
    status = tessera::kUsageExitStatus;
  } catch (const CLI::ParseError& e) {
    status = tessera_apps::report_parse_error(app, e, "train_gcn", rank == 0);
  } catch (const tessera::OptionError& e) {
    // A flag, or a combination, refused (here or by the Session against the ranks and the
    // launch): the same message on every rank, rank 0 reports it.
    if (rank == 0) std::fprintf(stderr, "train_gcn: error: %s\n", e.what());
    status = tessera::kUsageExitStatus;
  } catch (const std::exception& e) {
    // The Session agreed on the failure across ranks (or ended the job itself when one rank
    // failed alone): every rank is here with the same message, rank 0 reports it.
    if (rank == 0) std::fprintf(stderr, "train_gcn: error: %s\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
