// SPDX-License-Identifier: Apache-2.0
// The training loop of one rank, the same for every parallel mode: the mode's runner does the
// step's forward and backward (engine/mode_runner.h); then one all-reduce of the gradients, an
// Adam step, one all-reduce of the step's figures (StepSums), and (every eval_every epochs) an
// evaluation whose metrics are taken over all ranks (engine/evaluation.h). Runs, checkpoints,
// resume and stop signals around it.
#include "engine/trainer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>

#include "comm/agreement.h"
#include "core/error.h"
#include "core/kernels.h"
#include "engine/checkpoint.h"
#include "engine/evaluation.h"
#include "engine/fault_injection.h"
#include "engine/modes.h"
#include "engine/optimizer.h"
#include "engine/system.h"
#include "engine/trainer_state.h"

namespace tessera {
namespace {

// The figures of one training step that every rank contributes to, summed in one all-reduce:
// this rank's loss sum, its communication seconds, whether it saw a stop signal, the bytes it
// sent by category, and its peak resident memory in its own slot.
struct StepSums {
  double loss = 0.0;
  double comm_s = 0.0, hidden_s = 0.0, encode_s = 0.0, decode_s = 0.0;
  double stop = 0.0;
  std::array<double, kCategories> sent{}, raw{};
  std::vector<double> peak_rss;  // (K)

  // Every value, in the all-reduce's order.
  template <class F>
  void each(F&& f) {
    for (double* v : {&loss, &comm_s, &hidden_s, &encode_s, &decode_s, &stop}) f(*v);
    for (int c = 0; c < kCategories; ++c) {
      f(sent[c]);
      f(raw[c]);
    }
    for (double& r : peak_rss) f(r);
  }
  void all_reduce(Communicator& comm) {
    std::vector<double> flat;
    each([&](double& v) { flat.push_back(v); });
    comm.all_reduce_sum(std::span<double>(flat), TrafficCategory::Setup);
    std::size_t i = 0;
    each([&](double& v) { v = flat[i++]; });
  }
};

}  // namespace

Trainer::Trainer(const TrainConfig& config, GraphPart part, Communicator& comm)
    : config_(config), impl_(std::make_unique<Impl>()) {
  impl_->part = std::move(part);
  impl_->comm = &comm;
  setup();
}

Trainer::Trainer(const TrainConfig& config, const Dataset& dataset)
    : config_(config), impl_(std::make_unique<Impl>()) {
  TESSERA_CHECK(dataset.num_nodes() > 0, InvalidInput, "dataset '", dataset.name, "' has no nodes");
  const Csr graph = training_graph(dataset);
  PartitionPlan plan;
  plan.owner.assign(static_cast<std::size_t>(dataset.num_nodes()), 0);
  const DatasetInfo info = dataset_info(dataset);
  impl_->part = PartBuilder(dataset, graph, plan, info).build(0);
  impl_->own_comm = std::make_unique<SelfCommunicator>();
  impl_->comm = impl_->own_comm.get();
  setup();
}

Trainer::~Trainer() = default;

void Trainer::prepare_part() {
  GraphPart& part = impl_->part;
  validate(part, "part " + std::to_string(part.graph.part));
  TESSERA_CHECK(part.dataset.num_outputs() > 0, InvalidInput, "dataset '", part.dataset.name,
                "' has no classes or tasks");
  if (config_.threads > 0) set_num_threads(config_.threads);
  impl_->fault = fault_injection_from_env();
  if (config_.normalize_features) row_normalize(part.features);
}

// The runner's set-up steps, each agreed so that no rank enters a collective alone, and the
// part's totals summed over ranks in between.
void Trainer::setup() {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  Stopwatch watch;
  run_agreed(comm, "checking the configuration", [&] {
    validate(config_);
    s.runner = mode_spec(config_.mode()).make(config_, s.part, comm);
  });
  s.runner->connect();
  const std::int64_t local_terms = run_agreed(comm, "building the graph operator", [&] {
    prepare_part();
    const LossRows loss = loss_rows(s.part);
    s.runner->build(loss);
    return loss.terms;
  });
  // Each part counts once: in pipelined modes the S ranks of a part hold the same rows.
  const double counted = s.runner->counts_part() ? 1.0 : 0.0;
  std::vector<double> sums;
  for (const double v :
       {static_cast<double>(local_terms), static_cast<double>(s.part.train_rows.size()),
        static_cast<double>(s.part.valid_rows.size()), static_cast<double>(s.part.test_rows.size()),
        static_cast<double>(s.runner->operator_nnz())})
    sums.push_back(counted * v);
  comm.all_reduce_sum(std::span<double>(sums), TrafficCategory::Setup);
  s.loss_terms = static_cast<std::int64_t>(sums[0]);
  s.totals = {static_cast<std::int64_t>(sums[1]), static_cast<std::int64_t>(sums[2]),
              static_cast<std::int64_t>(sums[3]), static_cast<std::int64_t>(sums[4])};
  TESSERA_CHECK(s.loss_terms > 0, InvalidInput, "dataset '", s.part.dataset.name,
                "' has no labelled training node");
  run_agreed(comm, "starting the parallel mode", [&] { s.runner->start(s.loss_terms); });
  s.runner->wire();
  setup_s_ = watch.seconds();
}

const Model& Trainer::model() const {
  TESSERA_CHECK(impl_->model != nullptr, InvalidArgument, "no run has been trained yet");
  return *impl_->model;
}
const GraphPart& Trainer::part() const { return impl_->part; }
const GraphTotals& Trainer::totals() const { return impl_->totals; }
ParallelInfo Trainer::parallel_info() const { return impl_->runner->info(); }

const Tensor* Trainer::evaluate_now() {
  TESSERA_CHECK(impl_->model != nullptr, InvalidArgument, "no model has been trained or loaded");
  return impl_->runner->evaluate(*impl_->model, config_.epochs);
}

void Trainer::load_weights(std::span<const float> params, std::span<const float> buffers) {
  begin_run(0);
  set_model_weights(*impl_->model, params, buffers, "the weights loaded");
}

void set_model_weights(Model& model, std::span<const float> params, std::span<const float> buffers,
                       const char* source) {
  TESSERA_CHECK(params.size() == model.params().size() && buffers.size() == model.buffers().size(),
                InvalidInput, source, ": ", params.size(), " parameters and ", buffers.size(),
                " buffer values, the model has ", model.params().size(), " and ",
                model.buffers().size(), " (other features, classes or layers?)");
  model.set_params(params);
  std::copy(buffers.begin(), buffers.end(), model.buffers().begin());
}

ModelConfig model_config(const TrainConfig& config, const DatasetInfo& data, int run) {
  ModelConfig c;
  c.kind = config.kind();
  c.in_channels = data.num_features;
  c.hidden_channels = config.hidden_channels;
  c.out_channels = data.num_outputs();
  c.num_layers = config.num_layers;
  c.dropout = config.dropout;
  c.input_dropout = config.input_dropout;
  c.batch_norm = config.batch_norm;
  c.hyper = config.hyper();
  c.seed = config.seed + static_cast<std::uint64_t>(run);
  return c;
}

Trainer::RunState Trainer::begin_run(int run) {
  Impl& s = *impl_;
  const DatasetInfo& data = s.part.dataset;
  const ModelConfig whole = model_config(config_, data, run);
  s.model = std::make_unique<Model>(s.runner->model_config(whole));
  index_model_slice(s.model_index, *s.model, whole);
  s.model->to(s.runner->device());  // built on the host, trained where the data lives
  RunState state;
  state.run = run;
  state.adam = std::make_unique<Adam>(AdamConfig{.lr = config_.lr,
                                                 .weight_decay = config_.weight_decay,
                                                 .dense_weight_decay = config_.dense_weight_decay},
                                      s.model->param_info(),
                                      static_cast<std::int64_t>(s.model->params().size()),
                                      s.runner->device());
  state.result.run = run;
  state.result.seed = whole.seed;
  state.result.best_valid = -1.0;
  // Error-feedback residuals and pipeline histories start empty in every run (a resume then
  // restores the histories from the checkpoint; residuals are per rank and not part of it).
  s.runner->begin_run();
  return state;
}

Trainer::EpochEnd Trainer::train_epoch(RunState& state, const EpochCallback& on_epoch) {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  Model& model = *s.model;
  RunResult& result = state.result;
  const int epoch = state.epoch + 1;
  EpochRecord record;
  record.run = state.run;
  record.epoch = epoch;
  record.bit_plan = s.runner->begin_epoch(epoch, result.seed);
  const TrafficCounter traffic_before = comm.traffic();
  if (s.fault.rank == comm.rank() && s.fault.epoch == epoch) inject_fault(s.fault, epoch);
  if (epoch % 16 == 0) release_free_heap();  // before the clock starts (engine/system.h)
  Stopwatch step;
  model.zero_grad();
  StepSums sums;
  sums.loss = s.runner->train_step(model, epoch, result.seed);
  Stopwatch reduce;
  s.runner->gradient_comm().all_reduce_sum(model.grads(), TrafficCategory::AllReduce);
  const double reduce_s = reduce.seconds();
  state.adam->step(model.params(), model.grads());
  record.epoch_s = step.seconds();

  // The step's figures, summed (means over ranks below); whether any rank received a stop
  // signal, so that all ranks stop after the same epoch.
  state.local_stop = stop_signal();
  const ExchangeTimes times = s.runner->times();
  sums.comm_s = times.comm_s + reduce_s;
  sums.hidden_s = times.hidden_s();
  sums.encode_s = times.encode_s;
  sums.decode_s = times.decode_s;
  sums.stop = state.local_stop != 0 ? 1.0 : 0.0;
  for (int c = 0; c < kCategories; ++c) {
    const auto category = static_cast<TrafficCategory>(c);
    sums.sent[c] =
        static_cast<double>(comm.traffic().sent(category) - traffic_before.sent(category));
    sums.raw[c] = static_cast<double>(comm.traffic().raw(category) - traffic_before.raw(category));
  }
  sums.peak_rss.assign(static_cast<std::size_t>(comm.size()), 0.0);
  sums.peak_rss[static_cast<std::size_t>(comm.rank())] = static_cast<double>(peak_rss_bytes());
  sums.all_reduce(comm);
  const double k = comm.size();
  const float loss_scale = 1.0f / static_cast<float>(s.loss_terms);  // as the runners scale
  record.loss = sums.loss * static_cast<double>(loss_scale);
  record.comm_s = sums.comm_s / k;
  record.comm_hidden_s = sums.hidden_s / k;
  record.encode_s = sums.encode_s / k;
  record.decode_s = sums.decode_s / k;
  for (double rss : sums.peak_rss) record.peak_rss_bytes.push_back(static_cast<std::uint64_t>(rss));
  for (int c = 0; c < kCategories; ++c) {
    record.bytes[c] = static_cast<std::uint64_t>(sums.sent[c]);
    record.raw_bytes[c] = static_cast<std::uint64_t>(sums.raw[c]);
    state.bytes_total[c] += sums.sent[c];
    state.raw_total[c] += sums.raw[c];
  }
  TESSERA_CHECK(std::isfinite(record.loss), InvalidInput, "training diverged: loss is ",
                record.loss, " at epoch ", epoch, " (try a smaller --lr)");
  result.epoch_seconds.push_back(record.epoch_s);
  result.comm_seconds.push_back(record.comm_s);
  result.hidden_seconds.push_back(record.comm_hidden_s);
  result.encode_seconds.push_back(record.encode_s);
  result.decode_seconds.push_back(record.decode_s);
  result.final_loss = record.loss;
  if (epoch % config_.eval_every == 0 || epoch == config_.epochs) evaluate_epoch(state, record);
  state.epoch = epoch;
  s.history.push_back(record);
  // Whether any rank's callback asked to stop (every rank takes part: ranks may differ in
  // having a callback). Training then ends as finished, its final metrics evaluated.
  std::array<std::int64_t, 1> asked = {on_epoch && !on_epoch(record) ? 1 : 0};
  comm.all_reduce_max(asked);
  if (asked[0] != 0) {
    if (!record.evaluated) {
      evaluate_epoch(state, record);
      s.history.back() = record;
    }
    return EpochEnd::Asked;
  }
  return sums.stop > 0.0 ? EpochEnd::Signal : EpochEnd::Continue;
}

void Trainer::evaluate_epoch(RunState& state, EpochRecord& record) {
  Impl& s = *impl_;
  Stopwatch eval;
  const Tensor* logits = s.runner->evaluate(*s.model, record.epoch);
  const SplitMetrics m = evaluate_splits(*s.comm, s.part, logits);
  record.train_metric = m.train;
  record.valid_metric = m.valid;
  record.test_metric = m.test;
  record.valid_loss = m.valid_loss;
  record.evaluated = true;
  record.eval_s = eval.seconds();
  RunResult& result = state.result;
  result.highest_train = std::max(result.highest_train, record.train_metric);
  if (record.valid_metric > result.best_valid && config_.restore_best) {
    state.best_params = s.model->host_params();
    state.best_buffers.assign(s.model->buffers().begin(), s.model->buffers().end());
  }
  if (record.valid_metric > result.best_valid) {
    result.best_valid = record.valid_metric;
    result.test_at_best_valid = record.test_metric;
    result.train_at_best_valid = record.train_metric;
    result.best_epoch = record.epoch;
  }
  if (result.lowest_loss_epoch == 0 || record.valid_loss < result.lowest_valid_loss) {
    result.lowest_valid_loss = record.valid_loss;
    result.lowest_loss_epoch = record.epoch;
  }
  result.final_train = record.train_metric;
  result.final_valid = record.valid_metric;
  result.final_test = record.test_metric;
}

// --patience: the run ends after an evaluated epoch that is `patience` epochs past its best
// validation epoch (highest metric, or with --patience-on loss lowest loss). Read from the state
// alone, so that a run resumed from a checkpoint written at that epoch ends there too.
bool Trainer::patience_spent(const RunState& state) const {
  const int best =
      config_.patience_on == "loss" ? state.result.lowest_loss_epoch : state.result.best_epoch;
  return config_.patience > 0 && state.epoch > 0 && state.epoch % config_.eval_every == 0 &&
         state.epoch - best >= config_.patience;
}

RunResult Trainer::finish_run(RunState& state) {
  if (config_.restore_best && !state.best_params.empty())  // the best epoch's weights
    set_model_weights(*impl_->model, state.best_params, state.best_buffers, "the best epoch");
  RunResult result = state.result;
  const double epochs = std::max(state.epoch, 1);  // fewer than configured after early stopping
  for (int c = 0; c < kCategories; ++c) {
    result.bytes_per_epoch[c] = static_cast<std::uint64_t>(state.bytes_total[c] / epochs);
    result.raw_bytes_per_epoch[c] = static_cast<std::uint64_t>(state.raw_total[c] / epochs);
  }
  return result;
}

RunResult Trainer::train_run(int run, const EpochCallback& on_epoch) {
  RunState state = begin_run(run);
  while (state.epoch < config_.epochs && !patience_spent(state) &&
         train_epoch(state, on_epoch) != EpochEnd::Asked) {
  }
  impl_->history.clear();  // only train() keeps the records (for checkpoints)
  return finish_run(state);
}

TrainOutcome Trainer::train(const EpochCallback& on_epoch) {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  const bool root = comm.rank() == 0;
  TrainOutcome out;
  if (config_.handle_signals) install_stop_handlers();
  const std::uint64_t partition = partition_fingerprint(comm, s.part.graph.owned_ids);
  const bool checkpoints = !config_.checkpoint_dir.empty();
  std::optional<CheckpointState> resumed;
  if (checkpoints) resumed = find_resume_point(out);
  s.history.clear();
  s.finished.clear();
  if (resumed) {
    out.resumed_ranks = resumed->ranks;
    s.finished = resumed->finished;
    s.history = resumed->history;
    if (root) {
      std::fprintf(stderr,
                   "Resuming from %s: run %d, %d of %d epochs done (checkpoint of %d rank%s, "
                   "now %d)\n",
                   out.resumed_from.c_str(), resumed->run + 1, resumed->epoch, config_.epochs,
                   resumed->ranks, resumed->ranks == 1 ? "" : "s", comm.size());
    }
    for (EpochRecord record : s.history) {
      record.replayed = true;
      if (on_epoch) on_epoch(record);
    }
  }
  for (int run = resumed ? resumed->run : 0; run < config_.runs; ++run) {
    RunState state = begin_run(run);
    if (resumed) {
      restore_run(state, *resumed);
      resumed.reset();
    }
    while (state.epoch < config_.epochs && !out.early_stopped && !patience_spent(state)) {
      const EpochEnd end = train_epoch(state, on_epoch);
      out.early_stopped = end == EpochEnd::Asked;
      const bool stop = end == EpochEnd::Signal;
      const bool run_ends = state.epoch == config_.epochs || patience_spent(state);
      const bool last = out.early_stopped || (run_ends && run == config_.runs - 1);
      const bool periodic =
          config_.checkpoint_every > 0 && state.epoch % config_.checkpoint_every == 0;
      if (checkpoints && (stop || last || periodic)) {
        out.checkpoint = save_checkpoint(state, partition);
        if (root && config_.progress() && !last)
          std::fprintf(stderr, "Checkpoint %s\n", out.checkpoint.c_str());
      }
      if (stop && !last) {
        out.stopped = true;
        out.stop_signal = state.local_stop;
        out.stop_run = run;
        out.stop_epoch = state.epoch;
        out.results = s.finished;
        return out;
      }
    }
    s.finished.push_back(finish_run(state));
    if (out.early_stopped) {
      out.stop_run = run;
      out.stop_epoch = state.epoch;
      break;
    }
  }
  out.results = s.finished;
  return out;
}

}  // namespace tessera
