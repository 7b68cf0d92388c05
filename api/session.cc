// SPDX-License-Identifier: Apache-2.0
// Session: the public API over the engine — Options to TrainConfig, load_part for the parts,
// one Trainer per rank, the run loop with metrics, summary and report (what train_gcn used to
// do itself), and the results copied out of the model. Internal errors become std::
// exceptions at this boundary; a failure of one rank alone ends the job.
#include "tessera/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "api/api_support.h"
#include "api/graph_view.h"
#include "comm/agreement.h"
#include "comm/launch_env.h"
#include "comm/message_tags.h"
#include "comm/mpi_communicator.h"
#include "core/build_info.h"
#include "core/cpu/dispatch.h"
#include "core/error.h"
#include "engine/checkpoint.h"
#include "engine/evaluation.h"
#include "engine/fault_injection.h"
#include "engine/outputs.h"
#include "engine/part_loader.h"
#include "engine/pipeline.h"
#include "engine/run_report.h"
#include "engine/system.h"
#include "engine/trainer.h"
#include "partition/partition_store.h"

namespace tessera {
namespace {

using api::ensure_mpi;
using api::rethrow_public;
using api::to_config;
using api::to_matrix;
using api::warn_about_blas;

EpochStats to_stats(const EpochRecord& record) {
  EpochStats e;
  e.run = record.run;
  e.epoch = record.epoch;
  e.loss = record.loss;
  e.evaluated = record.evaluated;
  e.train_metric = record.train_metric;
  e.valid_metric = record.valid_metric;
  e.test_metric = record.test_metric;
  e.epoch_s = record.epoch_s;
  e.eval_s = record.eval_s;
  e.comm_s = record.comm_s;
  for (std::size_t c = 0; c < record.bytes.size(); ++c) {
    e.bytes_sent += record.bytes[c];
    e.bytes_raw += record.raw_bytes[c];
  }
  return e;
}

RunStats to_stats(const RunResult& r) {
  RunStats o;
  o.run = r.run;
  o.seed = r.seed;
  o.highest_train = r.highest_train;
  o.best_valid = r.best_valid;
  o.train_at_best_valid = r.train_at_best_valid;
  o.test_at_best_valid = r.test_at_best_valid;
  o.best_epoch = r.best_epoch;
  o.epochs = static_cast<int>(r.epoch_seconds.size());
  o.final_train = r.final_train;
  o.final_valid = r.final_valid;
  o.final_test = r.final_test;
  o.final_loss = r.final_loss;
  o.epoch_s_median = median(r.epoch_seconds);
  for (std::uint64_t b : r.bytes_per_epoch) o.bytes_per_epoch += static_cast<double>(b);
  return o;
}

}  // namespace

// The files one train() or predict() call writes on rank 0, removed again unless the call
// finished: a failed call leaves none of its outputs behind (each is written through a
// temporary file and a rename, so none is ever half-written either).
class WrittenOutputs {
 public:
  WrittenOutputs() = default;
  WrittenOutputs(const WrittenOutputs&) = delete;
  WrittenOutputs& operator=(const WrittenOutputs&) = delete;
  ~WrittenOutputs() {
    std::error_code ignored;
    for (const std::string& path : paths_) std::filesystem::remove(path, ignored);
  }
  void add(const std::string& path) { paths_.push_back(path); }
  void keep() { paths_.clear(); }  // the call finished

 private:
  std::vector<std::string> paths_;
};

struct Session::Impl {
  Options options;
  TrainConfig config;
  std::unique_ptr<MpiCommunicator> comm;
  LaunchEnv launch;
  std::vector<std::string> hosts;  // every rank's, in rank order
  DatasetInfo info;
  std::string method = "none";
  std::optional<PartitionStats> stats;
  double load_s = 0.0;
  double order_s = 0.0;  // renumbering the nodes (LoadedPart::order_s)
  Stopwatch since_start;
  std::unique_ptr<Trainer> trainer;
  std::vector<RunResult> results;
  bool stopped = false;  // the last train() was ended by a stop signal
  std::optional<ModelFile> predict_model;  // options.predict's weights and model options
  bool predicted = false;                  // predict() evaluated them

  template <class F>
  auto guarded(F&& body) -> decltype(body()) {
    return api::guarded(comm.get(), std::forward<F>(body));
  }
  void require_loaded(const char* what) const {
    TESSERA_CHECK(trainer != nullptr, InvalidArgument, "Session::", what,
                  ": load a dataset first");
  }
  void require_trained(const char* what) const {
    require_loaded(what);
    TESSERA_CHECK(!results.empty() || predicted, InvalidArgument, "Session::", what,
                  ": train (or predict) first");
  }
  void load(PartSource source);
  // Pipelined modes: the first stage of every pipeline loads (or partitions) one graph part per
  // pipeline and ships it to the other stages of its pipeline.
  LoadedPart load_pipelined(PartSource source);
  // --predict: rank 0 reads the file and sends it to every rank, whose configuration then takes
  // the model options from it.
  void read_predict_model();
  // Whether training ends with an evaluation pass of the final weights: for the output files,
  // and for embeddings() after --restore-best replaced the last epoch's weights.
  bool final_pass() const {
    return config.restore_best || !config.save_predictions.empty() ||
           !config.save_embeddings.empty() || !config.save_model.empty();
  }
  // After the final evaluation pass (`logits` from Trainer::evaluate_now), the files of
  // --save-predictions and --save-embeddings (gathered onto rank 0 by node id) and, when
  // `trained`, --save-model; each file written is added to `written` (rank 0). Collective.
  void write_outputs(const Tensor* logits, bool trained, WrittenOutputs& written);
  // The summary JSON of the finished call (rank 0), with every rank's peak memory `rss`.
  void write_summary(const std::vector<std::int64_t>& rss);
};

void Session::Impl::read_predict_model() {
  const std::string& path = config.predict;
  std::vector<std::byte> image;
  run_agreed(*comm, "reading --predict", [&] {
    if (comm->rank() != 0) return;
    std::error_code ec;
    TESSERA_CHECK(std::filesystem::is_regular_file(path, ec), InvalidArgument, "--predict ", path,
                  ": no such file");
    image = read_file_bytes(path);
  });
  std::vector<std::int64_t> size = {static_cast<std::int64_t>(image.size())};
  comm->all_reduce_max(size);
  image.resize(static_cast<std::size_t>(size[0]));
  comm->broadcast(image, 0, TrafficCategory::Setup);
  run_agreed(*comm, "reading --predict", [&] {
    // (A label that is not the file's own name: HDF5 refuses to open an image under the name of
    // an existing file.)
    const std::string label = "--predict " + path;
    ModelFile model = model_from_image(image, label);
    apply_model_options(config, model.identity, label);
    validate(config);
    predict_model = std::move(model);
  });
  if (comm->rank() == 0 && options.verbosity >= 1)
    std::fprintf(stderr, "Model of %s: --model %s --num-layers %d --hidden-channels %lld%s%s\n",
                 path.c_str(), config.model.c_str(), config.num_layers,
                 static_cast<long long>(config.hidden_channels),
                 config.batch_norm ? " --batch-norm" : "",
                 config.normalize_features ? " --normalize-features" : "");
}

void Session::Impl::write_outputs(const Tensor* logits, bool trained, WrittenOutputs& written) {
  const bool root = comm->rank() == 0;
  const std::span<const GlobalId> ids = trainer->part().graph.dataset_ids();
  if (!config.save_predictions.empty()) {
    Tensor all = gather_by_id(*comm, logits, ids, info.num_nodes, info.num_outputs());
    run_agreed(*comm, "writing --save-predictions", [&] {
      if (!root) return;
      to_probabilities(all, info.task == TaskType::MultiClass);
      write_matrix(config.save_predictions, all);
      written.add(config.save_predictions);
    });
  }
  if (!config.save_embeddings.empty()) {
    const Tensor& layer = trainer->model().embeddings(embedding_layer_of(config));
    Tensor mine(layer.rows(), layer.cols());
    mine.copy_from(layer);
    const Tensor all = gather_by_id(*comm, &mine, ids, info.num_nodes, mine.cols());
    run_agreed(*comm, "writing --save-embeddings", [&] {
      if (!root) return;
      write_matrix(config.save_embeddings, all);
      written.add(config.save_embeddings);
    });
  }
  if (trained && !config.save_model.empty()) {
    auto weights = trainer->whole_weights();  // collective: a pipeline's stages
    run_agreed(*comm, "writing --save-model", [&] {
      if (!root) return;
      ModelFile file{checkpoint_identity(config, info), std::move(weights.first),
                     std::move(weights.second)};
      const std::vector<std::byte> image = model_image(file);
      write_file_atomic(config.save_model,
                        {reinterpret_cast<const char*>(image.data()), image.size()});
      written.add(config.save_model);
    });
  }
}

void Session::Impl::write_summary(const std::vector<std::int64_t>& rss) {
  RunInfo run_info;
  run_info.config = &config;
  run_info.dataset = &info;
  run_info.totals = &trainer->totals();
  run_info.ranks = comm->size();
  run_info.partition_method = method;
  run_info.partition = stats ? &*stats : nullptr;
  run_info.load_s = load_s;
  run_info.node_order_s = order_s;
  run_info.setup_s = trainer->setup_seconds();
  run_info.total_s = since_start.seconds();
  for (std::int64_t bytes : rss) {
    run_info.peak_rss_bytes_per_rank.push_back(static_cast<std::uint64_t>(bytes));
    run_info.peak_rss_bytes_max =
        std::max(run_info.peak_rss_bytes_max, static_cast<std::uint64_t>(bytes));
    run_info.peak_rss_bytes_sum += static_cast<std::uint64_t>(bytes);
  }
  run_info.parallel = trainer->parallel_info();
  run_info.provenance = {build_info().version, build_info().git_commit, command_line(), hosts,
                         launch.job_id,        launch.array_task};
  write_file_atomic(config.summary, summary_json(run_info, results));
}

Session::Session(const Options& options) : Session(options, MPI_COMM_NULL) {}

Session::Session(const Options& options, MPI_Comm comm) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = options;
  s.comm = api::make_communicator(comm, options.comm_timeout);
  s.guarded([&] {
    run_agreed(*s.comm, "checking options", [&] {
      s.config = to_config(options);
      // TESSERA_CPU and TESSERA_SPMM_PREFETCH are read now: a bad value is a usage error here,
      // not an exception escaping the first kernel (std::terminate).
      cpu::cpu_level();
      cpu::spmm_prefetch_target();
    });
    // Output files go where rank 0 can write them: known now, not after hours of training.
    run_agreed(*s.comm, "checking the output files", [&] {
      if (s.comm->rank() == 0) check_output_dirs(s.config);
    });
    if (!s.config.predict.empty()) s.read_predict_model();
    if (s.comm->rank() == 0 && s.config.device != options.device)
      std::fprintf(stderr, "--device %s: %s\n", options.device.c_str(),
                   s.config.device == "cpu"
                       ? "no GPU here, training on the CPU (as OGB's examples do)"
                       : ("training on " + s.config.device).c_str());
    // From here on SIGUSR1 and SIGTERM only ask training to stop (after a checkpoint).
    if (s.config.handle_signals) install_stop_handlers();
    s.launch = detect_launch_env(*s.comm, s.comm->rank_on_node(), s.comm->ranks_on_node());
    s.hosts = host_names(*s.comm);
    if (s.comm->rank() == 0 && s.options.verbosity >= 1 && s.launch.slurm)
      std::fprintf(stderr, "Launch: %s\n", describe(s.launch).c_str());
    warn_about_blas(*s.comm, s.options.verbosity);
    // Threads per rank unless told (threads, OMP_NUM_THREADS): Slurm's CPUs per task, else the
    // node's cores shared among its ranks, so that K OpenMP teams do not fight over the cores.
    if (s.config.threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr) {
      if (s.launch.cpus_per_task > 0) {
        s.config.threads = s.launch.cpus_per_task;
      } else if (s.comm->ranks_on_node() > 1) {
        const int cores = static_cast<int>(std::thread::hardware_concurrency());
        s.config.threads = std::max(1, cores / s.comm->ranks_on_node());
      }
    }
    // Pipelined modes refuse a stage that would not fit: by default this node's memory shared
    // among its ranks.
    if (s.config.memory_budget == 0.0) {
      s.config.memory_budget = static_cast<double>(physical_memory_bytes()) /
                               std::max(1, s.comm->ranks_on_node()) / (1024.0 * 1024.0 * 1024.0);
    }
  });
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

int Session::rank() const { return impl_->comm->rank(); }
int Session::size() const { return impl_->comm->size(); }
const Options& Session::options() const { return impl_->options; }

void Session::Impl::load(PartSource source) {
  const bool root = comm->rank() == 0;
  source.partitions_dir = options.partitions;
  source.plan_file = options.partition_file;
  source.parts = options.parts;
  source.launcher_tasks = launch.slurm_tasks;
  source.method = run_agreed(*comm, "checking options",
                             [&] { return parse_partition_method(options.partition); });
  source.seed = config.seed;
  source.node_order = parse_node_order(options.node_order);
  source.progress = config.progress() && root;
  trainer.reset();
  results.clear();
  since_start = Stopwatch();
  const bool dataset_given = source.dataset_given;  // else a store's dataset is recorded
  LoadedPart loaded = config.mode() == ParallelMode::Graph ? load_part(source, *comm)
                                                           : load_pipelined(std::move(source));
  info = loaded.part.dataset;
  if (!dataset_given && !loaded.dataset_spec.empty()) config.dataset = loaded.dataset_spec;
  // The order the parts have (a store's, none for parts read in slices): what the summary and
  // the checkpoint identity record.
  config.node_order = to_string(loaded.node_order);
  method = loaded.method;
  stats = loaded.stats;
  load_s = loaded.load_s;
  order_s = loaded.order_s;
  if (root && options.verbosity >= 1) {
    std::fprintf(stderr,
                 "Loaded %s: %lld nodes, %lld edges, %lld features, %lld outputs (%.2f s%s)\n",
                 info.name.c_str(), static_cast<long long>(info.num_nodes),
                 static_cast<long long>(info.num_edges), static_cast<long long>(info.num_features),
                 static_cast<long long>(info.num_outputs()), load_s,
                 loaded.sliced              ? ", each rank its own rows"
                 : loaded.features_by_owner ? ", each rank its own feature rows"
                                            : "");
    const auto parts = stats ? static_cast<int>(stats->owned_nodes.size()) : 0;  // G in hybrid
    if (parts > 1) {
      std::fprintf(stderr,
                   "Partitioned (%s) into %d parts: edge cut %lld, halo nodes %lld, "
                   "imbalance %.3f (train %.3f), %.2f s\n",
                   method.c_str(), parts, static_cast<long long>(stats->edge_cut),
                   static_cast<long long>(stats->halo_nodes_total), stats->node_imbalance,
                   stats->train_imbalance, stats->seconds);
    }
    if (loaded.node_order != NodeOrder::None)
      std::fprintf(stderr, "Renumbered the nodes (%s) in %.2f s\n",
                   to_string(loaded.node_order).c_str(), loaded.order_s);
  }
  run_agreed(*comm, "setting up training", [&] {
    trainer = std::make_unique<Trainer>(config, std::move(loaded.part), *comm);
  });
}

LoadedPart Session::Impl::load_pipelined(PartSource source) {
  const int rank = comm->rank();
  // Placement only (rank -> part, stage); the layers are balanced once the data is known.
  const std::vector<double> unit(static_cast<std::size_t>(config.num_layers), 1.0);
  const PipelineLayout layout = run_agreed(*comm, "checking --parallel", [&] {
    const PipelineLayout l = pipeline_layout(config, rank, comm->size(), unit);
    TESSERA_CHECK(options.parts == 0 || options.parts == l.groups, InvalidArgument, "--parts ",
                  options.parts, ": --parallel ", config.parallel, " with ", comm->size(),
                  " ranks and ", l.stages, " stages trains ", l.groups, " graph part",
                  l.groups == 1 ? "" : "s");
    return l;
  });
  std::unique_ptr<Communicator> first_stages = comm->split(layout.first_stage() ? 0 : 1, rank);
  std::unique_ptr<Communicator> pipeline = comm->split(layout.group, layout.stage);
  source.parts = 0;  // checked above against the parts, not the ranks
  source.launcher_tasks = 0;
  LoadedPart loaded;
  std::vector<std::byte> image;
  run_agreed(*comm, "loading the graph parts", [&] {
    if (!layout.first_stage()) return;
    loaded = load_part(source, *first_stages);
    if (layout.stages > 1) image = part_image(loaded.part);
  });
  if (layout.stages > 1) {
    // The image's size and the node order, known on stage 0 (the others hold 0: NodeOrder::None).
    std::vector<std::int64_t> size = {static_cast<std::int64_t>(image.size()),
                                      static_cast<std::int64_t>(loaded.node_order)};
    pipeline->all_reduce_max(size);
    image.resize(static_cast<std::size_t>(size[0]));
    loaded.node_order = static_cast<NodeOrder>(size[1]);
    pipeline->broadcast(image, 0, TrafficCategory::Setup);
    run_agreed(*comm, "receiving the graph part", [&] {
      if (!layout.first_stage())
        loaded.part = part_from_image(image, "part " + std::to_string(layout.group) +
                                                 " from stage 0");
    });
  }
  return loaded;
}

void Session::load() {
  const Options& o = impl_->options;
  load(o.partitions.empty() || o.dataset != Options{}.dataset ? o.dataset : std::string());
}

void Session::load(const std::string& spec) {
  impl_->guarded([&] {
    run_agreed(*impl_->comm, "checking the dataset", [&] {
      TESSERA_CHECK(!spec.empty() || !impl_->options.partitions.empty(), InvalidArgument,
                    "Session::load: no dataset given (a path, synth:PRESET or a partition store)");
    });
    PartSource source;
    source.dataset = spec;
    source.dataset_given = !spec.empty();
    if (!spec.empty()) impl_->config.dataset = spec;
    impl_->load(std::move(source));
  });
}

void Session::load(const GraphView& graph) {
  impl_->guarded([&] {
    run_agreed(*impl_->comm, "checking the graph", [&] {
      TESSERA_CHECK(impl_->options.partitions.empty(), InvalidArgument,
                    "Session::load(GraphView) partitions in process: leave --partitions unset");
    });
    PartSource source;
    source.dataset = graph.name;
    source.make_dataset = [&graph] { return dataset_from_view(graph); };
    impl_->config.dataset = "arrays:" + graph.name;
    impl_->load(std::move(source));
  });
}

std::int64_t Session::num_nodes() const {
  return impl_->guarded([&] {
    impl_->require_loaded("num_nodes");
    return impl_->info.num_nodes;
  });
}

std::string Session::metric() const {
  return impl_->guarded([&] {
    impl_->require_loaded("metric");
    return impl_->info.eval_metric;
  });
}

std::int64_t Session::num_outputs() const {
  return impl_->guarded([&] {
    impl_->require_loaded("num_outputs");
    return impl_->info.num_outputs();
  });
}

TrainResult Session::train(const OnEpoch& on_epoch) {
  Impl& s = *impl_;
  return s.guarded([&] {
    run_agreed(*s.comm, "starting training", [&] {
      s.require_loaded("train");
      TESSERA_CHECK(s.config.predict.empty(), InvalidArgument,
                    "Session::train: the predict option is set; call predict() instead");
    });
    s.predicted = false;
    const bool root = s.comm->rank() == 0;
    const TrainConfig& config = s.config;
    std::optional<MetricsWriter> metrics;
    run_agreed(*s.comm, "opening the metrics file", [&] {
      if (root) metrics.emplace(config.metrics, s.info.eval_metric, s.trainer->parallel_info());
    });
    s.results.clear();
    const TrainOutcome outcome = s.trainer->train([&](const EpochRecord& record) {
      if (root) {
        metrics->write(record);
        if (config.progress() && !record.replayed) {
          if (!record.bit_plan.empty())
            std::fprintf(stderr, "Bit plan (rank 0), epoch %d: %s\n", record.epoch,
                         record.bit_plan.c_str());
          if (record.evaluated && record.epoch % config.log_steps == 0)
            std::fprintf(stderr, "%s\n", progress_line(record, s.info.eval_metric).c_str());
        }
      }
      return !on_epoch || on_epoch(to_stats(record));
    });
    s.results = outcome.results;
    s.stopped = outcome.stopped;
    TrainResult out;
    out.stopped = outcome.stopped;
    out.stop_signal = outcome.stop_signal;
    out.early_stopped = outcome.early_stopped;
    out.stop_run = outcome.stop_run;
    out.stop_epoch = outcome.stop_epoch;
    out.checkpoint = outcome.checkpoint;
    out.resumed_from = outcome.resumed_from;
    for (const RunResult& r : s.results) out.runs.push_back(to_stats(r));
    // Stopped: the metrics so far stay (they are in the checkpoint too); a later train() writes
    // the whole files.
    if (outcome.stopped) {
      run_agreed(*s.comm, "writing the metrics", [&] {
        if (root) metrics->commit();
      });
      return out;
    }
    WrittenOutputs written;
    if (s.final_pass()) s.write_outputs(s.trainer->evaluate_now(), true, written);
    // Every rank's peak resident memory, one slot each.
    std::vector<std::int64_t> rss(static_cast<std::size_t>(s.comm->size()), 0);
    rss[static_cast<std::size_t>(s.comm->rank())] = static_cast<std::int64_t>(peak_rss_bytes());
    s.comm->all_reduce_max(rss);
    run_agreed(*s.comm, "writing results", [&] {
      inject_output_fault(fault_injection_from_env(), s.comm->rank());
      if (!root) return;
      // The summary, then the metrics; a failure here or on another rank removes them all.
      if (!config.summary.empty()) {
        s.write_summary(rss);
        written.add(config.summary);
      }
      metrics->commit();
      if (!config.metrics.empty()) written.add(config.metrics);
    });
    written.keep();  // every rank got here: the call finished
    return out;
  });
}

SplitScores Session::predict() {
  Impl& s = *impl_;
  return s.guarded([&] {
    run_agreed(*s.comm, "starting prediction", [&] {
      s.require_loaded("predict");
      TESSERA_CHECK(s.predict_model.has_value(), InvalidArgument,
                    "Session::predict: set the predict option to a model file or a checkpoint");
      s.trainer->load_weights(s.predict_model->params, s.predict_model->buffers);
    });
    s.results.clear();
    s.predicted = true;
    const Tensor* logits = s.trainer->evaluate_now();
    const SplitMetrics m = evaluate_splits(*s.comm, s.trainer->part(), logits);
    WrittenOutputs written;
    s.write_outputs(logits, false, written);
    written.keep();
    return SplitScores{m.train, m.valid, m.test};
  });
}

std::string Session::report() const {
  return impl_->guarded([&] {
    impl_->require_loaded("report");
    std::string text;
    for (const RunResult& r : impl_->results) text += run_report(r);
    if (impl_->stopped || impl_->results.empty()) return text;
    return text + final_report(impl_->results, impl_->info.eval_metric);
  });
}

std::vector<std::int64_t> Session::node_ids() const {
  return impl_->guarded([&] {
    impl_->require_loaded("node_ids");
    const std::span<const GlobalId> ids = impl_->trainer->part().graph.dataset_ids();
    return std::vector<std::int64_t>(ids.begin(), ids.end());
  });
}

Matrix Session::embeddings(int layer) const {
  return impl_->guarded([&] {
    impl_->require_trained("embeddings");
    TESSERA_CHECK(impl_->config.mode() == ParallelMode::Graph, InvalidArgument,
                  "Session::embeddings: not available with parallel=", impl_->config.parallel,
                  " (each rank holds the activations of its stage's chunks only); train with "
                  "parallel=graph to read embeddings");
    const int layers = impl_->config.num_layers;
    TESSERA_CHECK(layer >= 0 && layer < layers, InvalidArgument, "Session::embeddings: layer ",
                  layer, " is not in [0, ", layers, ")");
    return to_matrix(impl_->trainer->model().embeddings(layer));
  });
}

Matrix Session::logits() const { return embeddings(impl_->config.num_layers - 1); }

std::vector<std::int64_t> Session::predictions() const {
  const Matrix m = logits();
  std::vector<std::int64_t> out(static_cast<std::size_t>(m.rows));
  for (std::int64_t r = 0; r < m.rows; ++r) {
    const float* row = m.data.data() + r * m.cols;
    out[static_cast<std::size_t>(r)] = std::max_element(row, row + m.cols) - row;
  }
  return out;
}

Matrix Session::gather_embeddings(int layer) const {
  Impl& s = *impl_;
  const Matrix mine = embeddings(layer);
  return s.guarded([&] {
    Tensor local(mine.rows, mine.cols);
    std::copy(mine.data.begin(), mine.data.end(), local.f32());
    const Tensor all = gather_by_id(*s.comm, &local, s.trainer->part().graph.dataset_ids(),
                                    s.info.num_nodes, mine.cols);
    return s.comm->rank() == 0 ? to_matrix(all) : Matrix{};
  });
}

std::vector<Parameter> Session::weights() const {
  return impl_->guarded([&] {
    impl_->require_trained("weights");
    const Model& model = impl_->trainer->model();
    std::vector<Parameter> out;
    const std::vector<float> all = model.host_params();
    for (const ParamInfo& p : model.param_info()) {
      const auto values = std::span<const float>(all).subspan(
          static_cast<std::size_t>(p.offset), static_cast<std::size_t>(p.rows * p.cols));
      out.push_back({p.name, p.rows, p.cols, {values.begin(), values.end()}});
    }
    return out;
  });
}

void Session::set_weights(const std::vector<Parameter>& weights) {
  Impl& s = *impl_;
  s.guarded([&] {
    run_agreed(*s.comm, "setting weights", [&] {
      s.require_trained("set_weights");
      const Model& model = s.trainer->model();
      std::vector<float> params = model.host_params();
      std::map<std::string, const ParamInfo*> known;
      for (const ParamInfo& p : model.param_info()) known[p.name] = &p;
      std::set<std::string> given;
      for (const Parameter& w : weights) {
        const auto it = known.find(w.name);
        TESSERA_CHECK(it != known.end(), InvalidArgument, "Session::set_weights: unknown weight '",
                      w.name, "' (weights() lists this model's)");
        const ParamInfo& p = *it->second;
        TESSERA_CHECK(w.rows == p.rows && w.cols == p.cols &&
                          w.values.size() == static_cast<std::size_t>(p.rows * p.cols),
                      InvalidArgument, "Session::set_weights: '", w.name, "' is ", w.rows, " x ",
                      w.cols, " with ", w.values.size(), " values, expected ", p.rows, " x ",
                      p.cols);
        TESSERA_CHECK(given.insert(w.name).second, InvalidArgument, "Session::set_weights: '",
                      w.name, "' is given twice");
        for (std::size_t i = 0; i < w.values.size(); ++i) {
          TESSERA_CHECK(std::isfinite(w.values[i]), InvalidArgument, "Session::set_weights: '",
                        w.name, "'[", i, "] is ", w.values[i], ", expected a finite value");
        }
        std::copy(w.values.begin(), w.values.end(),
                  params.begin() + static_cast<std::ptrdiff_t>(p.offset));
      }
      for (const auto& [name, info] : known) {
        TESSERA_CHECK(given.count(name) != 0, InvalidArgument, "Session::set_weights: '", name,
                      "' is missing (every weight is set at once)");
      }
      const std::vector<float> buffers(model.buffers().begin(), model.buffers().end());
      s.trainer->load_weights(params, buffers);
    });
    s.trainer->evaluate_now();
  });
}

std::string version() { return build_info().version; }

std::string build_description() { return build_text(); }

void use_best_blas_core(char** argv) { cpu::use_best_blas_core(argv); }

BlasCores blas_cores() {
  const cpu::BlasKernels blas = cpu::blas_kernels();
  return {blas.chosen, blas.weaker ? blas.best : std::string()};
}

}  // namespace tessera
