// SPDX-License-Identifier: Apache-2.0
// tessera::Session: one rank's handle on a distributed full-graph training job — the public C++
// API that train_gcn and the Python module are built on. Every rank of an MPI job creates a
// Session over the same communicator, loads the same dataset and trains; Tessera partitions the
// graph (one part per rank), exchanges halos (with the configured codecs) and all-reduces
// gradients inside. On one process it trains the whole graph, without mpiexec.
//
// Errors: a bad option or bad input throws std::invalid_argument (tessera::OptionError when an
// option, or a combination of them, is what is wrong), any other failure std::runtime_error, with
// the same message on every rank (collective calls agree on the outcome before returning). A
// failure of one rank in the middle of a training step, which the others cannot learn of without
// hanging, ends the whole job (MPI_Abort) after printing it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/epoch_hook.h"
#include "tessera/export.h"
#include "tessera/graph.h"
#include "tessera/options.h"

namespace tessera {

// One training step (every epoch) and, on evaluated epochs, the split metrics; the same record
// on every rank. Metrics are accuracy or ROC-AUC (Session::metric()), in [0, 1].
struct EpochStats {
  int run = 0;
  int epoch = 0;  // 1-based
  double loss = 0.0;
  bool evaluated = false;
  double train_metric = 0.0, valid_metric = 0.0, test_metric = 0.0;
  double epoch_s = 0.0;  // training step
  double eval_s = 0.0;
  double comm_s = 0.0;   // communication of the step, mean over ranks
  std::uint64_t bytes_sent = 0;  // by all ranks in the step (after codecs)
  std::uint64_t bytes_raw = 0;   // the same before codecs
};

// A run's figures. OGB's Logger calls best_valid "Highest Valid", and train_at_best_valid and
// test_at_best_valid "Final Train" and "Final Test"; final_* here are the last epoch's.
struct RunStats {
  int run = 0;
  std::uint64_t seed = 0;
  double highest_train = 0.0;
  double best_valid = 0.0;
  double train_at_best_valid = 0.0;
  double test_at_best_valid = 0.0;
  int best_epoch = 0;
  int epochs = 0;  // epochs trained: fewer than --epochs when --patience ended the run
  double final_train = 0.0, final_valid = 0.0, final_test = 0.0;  // the last epoch's
  double final_loss = 0.0;
  double epoch_s_median = 0.0;
  double bytes_per_epoch = 0.0;  // sent by all ranks, all categories
};

// One model's metric on each split (Session::predict).
struct SplitScores {
  double train = 0.0, valid = 0.0, test = 0.0;
};

// A dense row-major float matrix owned by the caller.
struct Matrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<float> data;  // (rows, cols)
  float operator()(std::int64_t r, std::int64_t c) const { return data[r * cols + c]; }
};

// A trained parameter: torch-style name ("convs.0.weight", "convs.0.bias", "bns.0.weight"),
// shape (rows, cols; cols = 1 for vectors) and values, row-major (weights are in x out).
struct Parameter {
  std::string name;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<float> values;
};

// What train() did: the runs, and whether a stop signal ended it early (options().
// handle_signals) — then after a checkpoint, from which a later train() with the same
// checkpoint_dir continues.
struct TrainResult {
  std::vector<RunStats> runs;  // every run; only the finished ones when stopped (early
                               // stopped: up to the run that stopped, which counts as finished)
  bool stopped = false;
  int stop_signal = 0;         // the signal this rank received (0: another rank's)
  bool early_stopped = false;  // on_epoch returned false: the training finished there
  int stop_run = 0;            // the run and the epochs of it done when training stopped
  int stop_epoch = 0;
  std::string checkpoint;      // the last checkpoint written (rank 0; empty: none)
  std::string resumed_from;    // the checkpoint this train() continued from (empty: none)
};

// The exit status programs use after a stop signal ended training with a checkpoint
// (EX_TEMPFAIL: start again to continue); train_gcn's, which the Slurm scripts requeue on.
inline constexpr int kStoppedExitStatus = 75;
// The exit status of a command line that cannot run: an unknown flag, a malformed value, one
// out of range or a combination that is refused (an OptionError), as argparse's status 2.
inline constexpr int kUsageExitStatus = 2;

// After every epoch, on every rank; returning false ends training after it (on every rank, as a
// finished training: the outputs are written), returning nothing goes on.
using OnEpoch = EpochHook<EpochStats>;

class TESSERA_API Session {
 public:
  // A job over MPI_COMM_WORLD (MPI is initialised if the caller has not, and finalised at exit),
  // or over the caller's communicator (duplicated; the caller keeps MPI's lifetime).
  explicit Session(const Options& options = {});
  Session(const Options& options, MPI_Comm comm);
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const;
  int size() const;
  const Options& options() const;

  // Collective: loads the dataset and gives each rank its part. `spec`: an OGB raw-layout
  // directory, a Tessera .h5 file or synth:PRESET[:SEED] (default, arxiv-like,
  // products-like). With options().partitions set, each rank reads its part file instead
  // (then `spec`, when not empty, must be the dataset the store was made from).
  void load(const std::string& spec);
  // The same for options().dataset; with options().partitions and the default dataset, the
  // dataset the store was made from.
  void load();
  // Collective: the same from arrays held by the caller. Only rank 0 reads its view (the other
  // ranks may pass an empty one); rank 0 partitions and sends each rank its part.
  void load(const GraphView& graph);

  // After load: the whole graph's node count, the metric ("acc" | "rocauc") and output width.
  std::int64_t num_nodes() const;
  std::string metric() const;
  std::int64_t num_outputs() const;

  // Collective: options().runs runs from fresh models (or continued from a checkpoint in
  // options().checkpoint_dir); on_epoch sees every epoch on every rank, including those replayed
  // from a checkpoint. Unless training was stopped, writes (rank 0) the files that are set:
  // metrics, summary, and from the last run's final weights (its best epoch's with
  // restore_best) save_predictions, save_embeddings and save_model.
  TrainResult train(const OnEpoch& on_epoch = {});
  // Collective, instead of train(), with options().predict set (a save_model file or a
  // checkpoint, read when the Session is made: its options define the model, over those given):
  // evaluates its weights on the loaded dataset, writes save_predictions and save_embeddings,
  // and returns the metrics. embeddings(), logits() and the rest then read this model.
  SplitScores predict();
  // The report of the last train(): a line per finished run, then (unless it was stopped) the
  // mean ± std over the runs.
  std::string report() const;

  // After train (or predict), from the last run's final evaluation (no dropout) — this rank's own
  // nodes (parallel = "graph" only: a pipeline stage holds no whole layer's output):
  std::vector<std::int64_t> node_ids() const;  // (n) the dataset's ids of the rows below
  Matrix embeddings(int layer) const;          // (n, width) layer output; layer in [0, L)
  Matrix logits() const;                       // (n, outputs): embeddings(L - 1)
  std::vector<std::int64_t> predictions() const;  // (n) argmax of logits (multi-class)
  // Collective: the same for the whole graph on rank 0, rows in node-id order (other ranks get
  // an empty matrix).
  Matrix gather_embeddings(int layer) const;
  // Trained parameters (identical on every rank; with parallel = "pipeline" or "hybrid", those
  // of this rank's stage, named by their layer in the whole model).
  std::vector<Parameter> weights() const;
  // Collective, after train() or predict(): sets every weight weights() lists (the same names
  // and shapes, all of them at once; batch-norm running statistics are kept), then runs an
  // evaluation pass, so that embeddings(), logits() and predictions() describe the new weights.
  // A later train() starts from fresh models as always.
  void set_weights(const std::vector<Parameter>& weights);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The pre-flight plan (train_gcn --plan), on one process and before any training: the
// predicted peak memory of every rank and the bytes of one training epoch for `options` on
// ranks.front() ranks, then alternatives (other codecs, pipeline and hybrid modes, the other
// rank counts of `ranks`). It loads the dataset and partitions it as a job would (or reads a
// partition store's parts one at a time) and measures one training step on small synthetic
// graphs of the same widths; docs/planner.md has the model and its validation. `table` is
// Markdown, `json` the same rows as JSON, also written to `json_path` when given (whole or not
// at all). Throws std::invalid_argument on bad options or input, std::runtime_error otherwise.
struct Plan {
  std::string table;
  std::string json;
};
TESSERA_API Plan plan(const Options& options, const std::vector<int>& ranks,
                      const std::string& json_path = "");

// "major.minor.patch" of the library.
TESSERA_API std::string version();
// The version, the source commit and the backends: "Tessera 0.2.0 (commit 5f9d58b3c2a1, CPU
// only)", then a line with the CPU kernels in use, as every program's --version prints it.
TESSERA_API std::string build_description();
// A program's first call, before MPI_Init: when the CPU runs faster GEMM kernels than the ones
// OpenBLAS chose for it (OpenBLAS 0.3.21 falls back to older ones on CPUs it does not know) and
// OPENBLAS_CORETYPE is unset, the program starts again in the same process with the variable
// naming the better core (OpenBLAS reads it only when it loads); otherwise this returns at once.
// Every Tessera program calls it; build_description() then names both cores. A value of
// OPENBLAS_CORETYPE the user set is kept.
TESSERA_API void use_best_blas_core(char** argv);
// OpenBLAS's GEMM kernels in this process: `chosen`, the core OpenBLAS runs (its own choice, or
// OPENBLAS_CORETYPE's), and `better`, the value of OPENBLAS_CORETYPE that selects faster kernels
// on this CPU when there is one (else empty). A process that cannot start again, such as a Python
// interpreter that imported the module, keeps `chosen` until it exits.
struct BlasCores {
  std::string chosen;
  std::string better;
};
TESSERA_API BlasCores blas_cores();

}  // namespace tessera
