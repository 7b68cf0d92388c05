// train_gcn: full-graph GCN / GraphSAGE training from the command line, with flags named as in
// OGB's node-property examples. Loads the dataset, trains --runs runs, prints a progress line
// per epoch on stderr and the final accuracies on stdout; optional metrics and summary JSON.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>

#include "datasets/loaders.h"
#include "engine/core/error.h"
#include "engine/run_report.h"
#include "engine/system.h"
#include "engine/trainer.h"

namespace {

using namespace tessera;

struct Flags {
  TrainConfig config;
  std::string model = "gcn";
  bool quiet = false;
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
  app.add_option("--threads", c.threads, "compute threads (0: OpenMP default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--device", c.device, "cpu (cuda where built with a GPU backend)")
      ->capture_default_str();
  app.add_option("--metrics", c.metrics_file, "write one JSON object per epoch to FILE");
  app.add_option("--summary", c.summary_file, "write a summary JSON object to FILE");
  app.add_flag("--quiet", f.quiet, "no per-epoch progress lines");
}

int run(const Flags& flags) {
  TrainConfig config = flags.config;
  config.model = parse_model_kind(flags.model);
  config.progress = !flags.quiet;
  validate(config);

  Stopwatch total;
  Stopwatch load;
  Dataset dataset = load_dataset(config.dataset, LoadOptions{.progress = config.progress});
  const double load_s = load.seconds();
  std::fprintf(stderr, "Loaded %s: %lld nodes, %lld edges, %lld features, %lld outputs (%.2f s)\n",
               dataset.name.c_str(), static_cast<long long>(dataset.num_nodes()),
               static_cast<long long>(dataset.graph.nnz()),
               static_cast<long long>(dataset.num_features()),
               static_cast<long long>(dataset.num_outputs()), load_s);

  Trainer trainer(config, dataset);
  MetricsWriter metrics(config.metrics_file, dataset.eval_metric);
  std::vector<RunResult> results;
  for (int run = 0; run < config.runs; ++run) {
    results.push_back(trainer.train_run(run, [&](const EpochRecord& record) {
      metrics.write(record);
      if (config.progress && record.evaluated)
        std::fprintf(stderr, "%s\n", progress_line(record, dataset.eval_metric).c_str());
    }));
    const RunResult& r = results.back();
    std::printf("Run %02d: best valid %.2f%% (epoch %d), test at best valid %.2f%%, final test %.2f%%\n",
                run + 1, 100.0 * r.best_valid, r.best_epoch, 100.0 * r.test_at_best_valid,
                100.0 * r.final_test);
  }
  std::printf("%s", final_report(results, dataset.eval_metric).c_str());
  std::fflush(stdout);
  metrics.commit();
  if (!config.summary_file.empty()) {
    RunInfo info{&config, &dataset, trainer.num_graph_edges(), load_s, trainer.setup_seconds(),
                 total.seconds()};
    write_file_atomic(config.summary_file, summary_json(info, results));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"train_gcn: full-graph GCN / GraphSAGE training (Tessera)"};
  Flags flags;
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run(flags);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "train_gcn: error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_gcn: error: %s\n", e.what());
  }
  return 1;
}
