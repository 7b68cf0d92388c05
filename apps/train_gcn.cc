// train_gcn: full-graph GCN / GraphSAGE training from the command line, with flags named as in
// OGB's node-property examples, on one process or across MPI ranks (mpiexec -n K train_gcn ...:
// one METIS part per rank, halo exchange between them). A thin layer over the public API
// (tessera::Session): flags become tessera::Options. Rank 0 prints a progress line per epoch on
// stderr and the final accuracies on stdout, and writes the optional metrics and summary.
// Under Slurm (srun or mpiexec inside an allocation) the launch environment is cross-checked;
// SIGUSR1/SIGTERM stop training after a checkpoint with exit status 75 (kStoppedExitStatus),
// and a later start with the same --checkpoint-dir continues from it (apps/slurm/ has batch
// scripts).
#include <CLI/CLI.hpp>
#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>

#include <tessera/tessera.h>

namespace {

struct Flags {
  tessera::Options options;
  std::string dataset = "synth:default";
  bool quiet = false;
  bool resume = false;
  bool no_resume = false;
};

void add_flags(CLI::App& app, Flags& f) {
  tessera::Options& c = f.options;
  app.add_option("--dataset", f.dataset,
                 "OGB raw-layout directory, Tessera .h5 file, or synth:PRESET[:SEED] "
                 "(presets: default, arxiv-like, products-like)")
      ->capture_default_str();
  app.add_option("--model", c.model, "gcn, sage, or resgcn (GCN with residual connections, for "
                 "deep models)")
      ->check(CLI::IsMember({"gcn", "sage", "resgcn"}))
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
  app.add_option("--parts", c.parts,
                 "number of graph parts; must equal the number of MPI ranks (default: the ranks)")
      ->check(CLI::PositiveNumber);
  app.add_option("--parallel", c.parallel,
                 "graph: one graph part per rank, halos exchanged every layer; pipeline: one "
                 "stage of consecutive layers per rank, graph chunks streamed between stages "
                 "(GNNPipe); hybrid: ranks = parts x --stages, a pipeline per graph part")
      ->check(CLI::IsMember({"graph", "pipeline", "hybrid"}))
      ->capture_default_str();
  app.add_option("--stages", c.stages,
                 "pipeline stages (hybrid: per graph part; pipeline: must equal the ranks)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--chunks", c.chunks,
                 "chunks each graph part is cut into for the pipeline, >= --stages (default: "
                 "the stages)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--memory-budget", c.memory_budget_gb,
                 "GiB one rank may use (pipeline/hybrid refuse a stage estimated above it; "
                 "default: the node's memory shared among its ranks)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--partition", c.partition, "partitioner when partitioning in process")
      ->check(CLI::IsMember({"metis", "random", "block"}))
      ->capture_default_str();
  app.add_option("--partitions", c.partitions_dir,
                 "partition store made by partition_graph: each rank reads only its part");
  app.add_option("--comm-timeout", c.comm_timeout,
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

// Trains as the flags say; returns the exit status. Collective.
int run(const Flags& flags, bool dataset_given) {
  tessera::Options options = flags.options;
  options.verbosity = flags.quiet ? 1 : 2;
  options.handle_signals = true;
  if (flags.resume) options.resume = "require";
  if (flags.no_resume) options.resume = "never";
  tessera::Session session(options, MPI_COMM_WORLD);
  const bool root = session.rank() == 0;
  // With a partition store and no --dataset, the store says which dataset it holds.
  session.load(dataset_given || options.partitions_dir.empty() ? flags.dataset : "");
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

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "train_gcn: error: MPI_Init_thread failed\n");
    return 1;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CLI::App app{"train_gcn: full-graph GCN / GraphSAGE training (Tessera)"};
  Flags flags;
  add_flags(app, flags);
  int status = 0;
  try {
    app.parse(argc, argv);
    status = run(flags, app.count("--dataset") > 0);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same arguments and fails the same way; only rank 0 speaks.
    std::ostringstream quiet;
    status = rank == 0 ? app.exit(e) : app.exit(e, quiet, quiet);
  } catch (const std::exception& e) {
    // The Session agreed on the failure across ranks (or ended the job itself when one rank
    // failed alone): every rank is here with the same message, rank 0 reports it.
    if (rank == 0) std::fprintf(stderr, "train_gcn: error: %s\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
