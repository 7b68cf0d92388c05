// train_gcn: full-graph GCN / GraphSAGE training from the command line, with flags named as in
// OGB's node-property examples, on one process or across MPI ranks (mpiexec -n K train_gcn ...:
// one METIS part per rank, halo exchange between them). Rank 0 prints a progress line per epoch
// on stderr and the final accuracies on stdout, and writes the optional metrics and summary.
// Under Slurm (srun or mpiexec inside an allocation) the launch environment is cross-checked;
// SIGUSR1/SIGTERM stop training after a checkpoint with exit status 75 (kExitStopped), and a
// later start with the same --checkpoint-dir continues from it (apps/slurm/ has batch scripts).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <exception>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "comm/agreement.h"
#include "comm/launch_env.h"
#include "comm/mpi_communicator.h"
#include "engine/core/error.h"
#include "engine/part_loader.h"
#include "engine/run_report.h"
#include "engine/system.h"
#include "engine/trainer.h"

namespace {

using namespace tessera;

struct Flags {
  TrainConfig config;
  std::string model = "gcn";
  bool quiet = false;
  int parts = 0;
  std::string partition = "metis";
  std::string partitions_dir;
  double comm_timeout = 900.0;
  bool resume = false;
  bool no_resume = false;
};

void add_flags(CLI::App& app, Flags& f) {
  TrainConfig& c = f.config;
  app.add_option("--dataset", c.dataset,
                 "OGB raw-layout directory, Tessera .h5 file, or synth:PRESET[:SEED] "
                 "(presets: default, arxiv-like, products-like)")
      ->capture_default_str();
  app.add_option("--model", f.model, "gcn or sage")
      ->check(CLI::IsMember({"gcn", "sage"}))
      ->capture_default_str();
  app.add_option("--num-layers", c.num_layers, "number of graph convolutions")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--hidden-channels", c.hidden_channels, "width of the hidden layers")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--dropout", c.dropout, "dropout after every hidden layer, in [0, 1)")
      ->capture_default_str();
  app.add_option("--input-dropout", c.input_dropout,
                 "dropout on the input features, in [0, 1) (Kipf & Welling: same as --dropout)")
      ->capture_default_str();
  app.add_option("--lr", c.lr, "Adam learning rate")->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay,
                 "L2 weight decay on convolution weights (Adam, torch semantics)")
      ->capture_default_str();
  app.add_option("--epochs", c.epochs, "training epochs per run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", c.seed, "seed of run 0; run r uses seed + r")->capture_default_str();
  app.add_flag("--normalize-features", c.normalize_features,
               "divide each feature row by its sum (Kipf & Welling)");
  app.add_option("--eval-every", c.eval_every, "evaluate train/valid/test every N epochs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--runs", c.runs, "independent runs (seeds); mean ± std is reported")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--batch-norm", c.batch_norm, "batch normalisation over nodes between layers");
  app.add_option("--threads", c.threads, "compute threads per rank (0: OpenMP default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--device", c.device, "cpu (cuda where built with a GPU backend)")
      ->capture_default_str();
  app.add_option("--codec", c.codec,
                 "encoding of halo embeddings: none, bf16, fp16, int8, int4, int2 (integer "
                 "codecs: per-row scale and offset, stochastic rounding) or adaptive (2/4/8 bits "
                 "per message in both directions under --bit-budget)")
      ->check(CLI::IsMember({"none", "bf16", "fp16", "int8", "int4", "int2", "adaptive"}))
      ->capture_default_str();
  app.add_option("--bit-budget", c.bit_budget,
                 "adaptive codec: average bits per value, in [2, 8]")
      ->capture_default_str();
  app.add_option("--replan-every", c.replan_every,
                 "adaptive codec: re-plan the bits every N epochs from the observed ranges")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--codec-backward", c.codec_backward,
                 "encoding of halo gradients (default: the same as --codec)")
      ->check(CLI::IsMember({"none", "bf16", "fp16", "int8", "int4", "int2"}));
  app.add_flag("--error-feedback", c.error_feedback,
               "add each row's quantisation residual to its next message");
  app.add_option("--parts", f.parts,
                 "number of graph parts; must equal the number of MPI ranks (default: the ranks)")
      ->check(CLI::PositiveNumber);
  app.add_option("--partition", f.partition, "partitioner when partitioning in process")
      ->check(CLI::IsMember({"metis", "random", "block"}))
      ->capture_default_str();
  app.add_option("--partitions", f.partitions_dir,
                 "partition store made by partition_graph: each rank reads only its part");
  app.add_option("--comm-timeout", f.comm_timeout,
                 "seconds a rank waits for a message or collective before giving up (<= 0: never)")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", c.checkpoint_dir,
                 "write checkpoints to DIR (rank 0) and continue from the newest valid one there");
  app.add_option("--checkpoint-every", c.checkpoint_every,
                 "epochs between checkpoints (0: only on SIGUSR1/SIGTERM and at the end)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--keep-checkpoints", c.keep_checkpoints, "newest checkpoints kept in DIR")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  auto* resume = app.add_flag("--resume", f.resume,
                              "require a valid checkpoint in --checkpoint-dir to continue from "
                              "(default: continue from one when there is one)");
  app.add_flag("--no-resume", f.no_resume,
               "start over even when --checkpoint-dir holds checkpoints (they get replaced)")
      ->excludes(resume);
  app.add_option("--metrics", c.metrics_file, "write one JSON object per epoch to FILE (rank 0)");
  app.add_option("--summary", c.summary_file, "write a summary JSON object to FILE (rank 0)");
  app.add_flag("--quiet", f.quiet, "no per-epoch progress lines");
}

int run(const Flags& flags, Communicator& comm, const LaunchEnv& env, bool dataset_given) {
  TrainConfig config = flags.config;
  const bool root = comm.rank() == 0;
  run_agreed(comm, "checking flags", [&] {
    config.model = parse_model_kind(flags.model);
    if (flags.resume) config.resume = ResumeMode::Require;
    if (flags.no_resume) config.resume = ResumeMode::Never;
    TESSERA_CHECK(!flags.resume || !config.checkpoint_dir.empty(), InvalidArgument,
                  "--resume needs --checkpoint-dir");
    validate(config);
  });
  if (root && config.progress && env.slurm)
    std::fprintf(stderr, "Launch: %s\n", describe(env).c_str());
  config.progress = !flags.quiet;

  Stopwatch total;
  PartSource source;
  source.dataset = config.dataset;
  source.dataset_given = dataset_given;
  source.partitions_dir = flags.partitions_dir;
  source.parts = flags.parts;
  source.launcher_tasks = env.slurm_tasks;
  source.method = parse_partition_method(flags.partition);
  source.seed = config.seed;
  source.progress = config.progress && root;
  LoadedPart loaded = load_part(source, comm);
  const DatasetInfo info = loaded.part.dataset;
  if (root) {
    std::fprintf(stderr, "Loaded %s: %lld nodes, %lld edges, %lld features, %lld outputs (%.2f s)\n",
                 info.name.c_str(), static_cast<long long>(info.num_nodes),
                 static_cast<long long>(info.num_edges), static_cast<long long>(info.num_features),
                 static_cast<long long>(info.num_outputs()), loaded.load_s);
    if (comm.size() > 1 && loaded.stats) {
      const PartitionStats& p = *loaded.stats;
      std::fprintf(stderr,
                   "Partitioned (%s) into %d parts: edge cut %lld, halo nodes %lld, "
                   "imbalance %.3f (train %.3f), %.2f s\n",
                   loaded.method.c_str(), comm.size(), static_cast<long long>(p.edge_cut),
                   static_cast<long long>(p.halo_nodes_total), p.node_imbalance, p.train_imbalance,
                   p.seconds);
    }
  }

  std::optional<Trainer> trainer;
  std::optional<MetricsWriter> metrics;
  run_agreed(comm, "setting up training", [&] {
    trainer.emplace(config, std::move(loaded.part), comm);
    if (root) metrics.emplace(config.metrics_file, info.eval_metric);
  });
  std::size_t runs_reported = 0;
  auto report_runs = [&](const std::vector<RunResult>& finished) {
    for (; runs_reported < finished.size(); ++runs_reported) {
      const RunResult& r = finished[runs_reported];
      if (!root) continue;
      std::printf(
          "Run %02d: best valid %.2f%% (epoch %d), test at best valid %.2f%%, final test %.2f%%\n",
          r.run + 1, 100.0 * r.best_valid, r.best_epoch, 100.0 * r.test_at_best_valid,
          100.0 * r.final_test);
    }
  };
  const TrainOutcome outcome = trainer->train([&](const EpochRecord& record) {
    if (!root) return;
    metrics->write(record);
    if (!config.progress || record.replayed) return;
    if (!record.bit_plan.empty())
      std::fprintf(stderr, "Bit plan (rank 0), epoch %d: %s\n", record.epoch,
                   record.bit_plan.c_str());
    if (record.evaluated)
      std::fprintf(stderr, "%s\n", progress_line(record, info.eval_metric).c_str());
  });
  const std::vector<RunResult>& results = outcome.results;
  report_runs(results);
  if (outcome.stopped) {
    // Nothing else to write: the metrics so far are in the checkpoint, and a later start with
    // the same --checkpoint-dir continues and writes the complete files.
    if (root) {
      const char* name = outcome.stop_signal == SIGUSR1   ? "SIGUSR1"
                         : outcome.stop_signal == SIGTERM ? "SIGTERM"
                                                          : "a stop signal on another rank";
      if (outcome.checkpoint.empty()) {
        std::fprintf(stderr, "Stopped by %s after run %d, epoch %d; no --checkpoint-dir, so the "
                     "next start begins again\n", name, outcome.stop_run + 1, outcome.stop_epoch);
      } else {
        std::fprintf(stderr, "Stopped by %s after run %d, epoch %d; checkpoint %s (start again "
                     "with the same --checkpoint-dir to continue)\n", name, outcome.stop_run + 1,
                     outcome.stop_epoch, outcome.checkpoint.c_str());
      }
    }
    return kExitStopped;
  }
  std::vector<std::int64_t> rss_max = {static_cast<std::int64_t>(peak_rss_bytes())};
  std::vector<double> rss_sum = {static_cast<double>(peak_rss_bytes())};
  comm.all_reduce_max(rss_max);
  comm.all_reduce_sum(std::span<double>(rss_sum), TrafficCategory::Setup);
  run_agreed(comm, "writing results", [&] {
    if (!root) return;
    std::printf("%s", final_report(results, info.eval_metric).c_str());
    std::fflush(stdout);
    metrics->commit();
    if (!config.summary_file.empty()) {
      RunInfo run_info;
      run_info.config = &config;
      run_info.dataset = &info;
      run_info.totals = &trainer->totals();
      run_info.ranks = comm.size();
      run_info.partition_method = loaded.method;
      run_info.partition = loaded.stats ? &*loaded.stats : nullptr;
      run_info.load_s = loaded.load_s;
      run_info.setup_s = trainer->setup_seconds();
      run_info.total_s = total.seconds();
      run_info.peak_rss_bytes_max = static_cast<std::uint64_t>(rss_max[0]);
      run_info.peak_rss_bytes_sum = static_cast<std::uint64_t>(rss_sum[0]);
      write_file_atomic(config.summary_file, summary_json(run_info, results));
    }
  });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  // From here on SIGUSR1 and SIGTERM only ask training to stop (after a checkpoint).
  install_stop_handlers();
  std::optional<MpiCommunicator> comm;
  try {
    comm.emplace(MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_gcn: error: %s\n", e.what());
    return 1;
  }
  const bool root = comm->rank() == 0;
  CLI::App app{"train_gcn: full-graph GCN / GraphSAGE training (Tessera)"};
  Flags flags;
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same arguments and fails the same way; only rank 0 speaks.
    if (root) return app.exit(e);
    std::ostringstream quiet;
    return app.exit(e, quiet, quiet);
  }
  comm->set_timeout(flags.comm_timeout);
  try {
    const LaunchEnv env = detect_launch_env(*comm, comm->rank_on_node(), comm->ranks_on_node());
    // Threads per rank unless told (--threads, OMP_NUM_THREADS): Slurm's CPUs per task, else the
    // node's cores shared among its ranks, so that K OpenMP teams do not fight over the cores.
    if (flags.config.threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr) {
      if (env.cpus_per_task > 0) {
        flags.config.threads = env.cpus_per_task;
      } else if (comm->ranks_on_node() > 1) {
        const int cores = static_cast<int>(std::thread::hardware_concurrency());
        flags.config.threads = std::max(1, cores / comm->ranks_on_node());
      }
    }
    return run(flags, *comm, env, app.count("--dataset") > 0);
  } catch (const AgreedError& e) {
    // Every rank threw this same error: rank 0 reports it, all exit normally.
    if (root) {
      std::fprintf(stderr, "train_gcn: error: [%s] %s\n", std::string(to_string(e.category())).c_str(),
                   e.message().c_str());
    }
    return 1;
  } catch (const Error& e) {
    // A failure of this rank alone (inside the training loop): the others may be waiting on
    // it, so end the whole job. The message names the rank.
    std::fprintf(stderr, "train_gcn: error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_gcn: error: rank %d: %s\n", comm->rank(), e.what());
  }
  std::fflush(stderr);
  if (comm->size() > 1) comm->abort(1);
  return 1;
}
