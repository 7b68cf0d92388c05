// The full-graph training loop of one rank: the part's operator built once (GCN weights from
// global degrees, or the mean over neighbours), then per epoch one forward/backward over the
// owned rows with halo exchanges inside the propagator, one all-reduce of the gradients, an
// Adam step, one all-reduce of the loss and the step's communication figures, and (every
// eval_every epochs) an evaluation whose counts are summed over ranks.
#include "engine/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "comm/agreement.h"
#include "comm/codec.h"
#include "datasets/evaluator.h"
#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/core/kernels.h"
#include "engine/halo_propagator.h"
#include "engine/optimizer.h"
#include "engine/system.h"

namespace tessera {

void validate(const TrainConfig& c) {
  TESSERA_CHECK(c.num_layers >= 1, InvalidArgument, "--num-layers must be >= 1, got ", c.num_layers);
  TESSERA_CHECK(c.hidden_channels >= 1, InvalidArgument, "--hidden-channels must be >= 1, got ",
                c.hidden_channels);
  TESSERA_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, InvalidArgument,
                "--dropout must be in [0, 1), got ", c.dropout);
  TESSERA_CHECK(c.input_dropout >= 0.0f && c.input_dropout < 1.0f, InvalidArgument,
                "--input-dropout must be in [0, 1), got ", c.input_dropout);
  TESSERA_CHECK(c.lr > 0.0f && std::isfinite(c.lr), InvalidArgument, "--lr must be > 0, got ", c.lr);
  TESSERA_CHECK(c.weight_decay >= 0.0f && std::isfinite(c.weight_decay), InvalidArgument,
                "--weight-decay must be >= 0, got ", c.weight_decay);
  TESSERA_CHECK(c.epochs >= 1, InvalidArgument, "--epochs must be >= 1, got ", c.epochs);
  TESSERA_CHECK(c.eval_every >= 1, InvalidArgument, "--eval-every must be >= 1, got ", c.eval_every);
  TESSERA_CHECK(c.runs >= 1, InvalidArgument, "--runs must be >= 1, got ", c.runs);
  TESSERA_CHECK(c.threads >= 0, InvalidArgument, "--threads must be >= 0, got ", c.threads);
  if (c.codec == "adaptive") {
    TESSERA_CHECK(c.codec_backward.empty(), InvalidArgument,
                  "--codec adaptive plans both directions; --codec-backward does not apply");
    TESSERA_CHECK(c.bit_budget >= 2.0 && c.bit_budget <= 8.0, InvalidArgument,
                  "--bit-budget must be in [2, 8] bits per value, got ", c.bit_budget);
    TESSERA_CHECK(c.replan_every >= 1, InvalidArgument, "--replan-every must be >= 1, got ",
                  c.replan_every);
  } else {
    parse_codec(c.codec);
  }
  if (!c.codec_backward.empty()) parse_codec(c.codec_backward);
  Device device = parse_device(c.device);
  TESSERA_CHECK(device.kind == DeviceKind::Cpu, InvalidArgument, "--device ", c.device,
                ": only the CPU backend is available in this build");
}

namespace {

// Class predictions (argmax) of the listed rows against their labels.
AccuracyCounts split_counts(const Tensor& logits, const std::vector<std::int64_t>& labels,
                            const std::vector<NodeId>& rows) {
  std::vector<std::int64_t> y_true(rows.size()), y_pred(rows.size());
  const std::int64_t c = logits.cols();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const float* row = logits.row<float>(rows[i]);
    y_true[i] = labels[rows[i]];
    y_pred[i] = std::max_element(row, row + c) - row;
  }
  return accuracy_counts(y_true, y_pred);
}

// Mean ROC-AUC over all ranks' listed rows: ROC-AUC does not decompose, so rank 0 gathers the
// (targets, scores) rows of every rank, computes it and broadcasts the value.
double split_rocauc(Communicator& comm, const Tensor& logits, const Tensor& targets,
                    const std::vector<NodeId>& rows) {
  const auto n = static_cast<std::int64_t>(rows.size());
  const std::int64_t t = targets.cols();
  Tensor local(n, 2 * t);  // (n, 2T): targets then scores
  for (std::int64_t i = 0; i < n; ++i) {
    std::copy_n(targets.row<float>(rows[i]), t, local.row<float>(i));
    std::copy_n(logits.row<float>(rows[i]), t, local.row<float>(i) + t);
  }
  const int k = comm.size();
  std::vector<std::int64_t> counts(static_cast<std::size_t>(k), 0);
  counts[static_cast<std::size_t>(comm.rank())] = n;
  comm.all_reduce_max(counts);
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  double value = 0.0;
  constexpr int kTag = 1 << 20;
  if (comm.rank() == 0) {
    Tensor all(total, 2 * t);
    std::copy_n(local.f32(), local.numel(), all.f32());
    std::vector<std::unique_ptr<Request>> requests;
    std::int64_t offset = n;
    for (int r = 1; r < k; ++r) {
      const std::size_t row_bytes = static_cast<std::size_t>(2 * t) * sizeof(float);
      if (counts[r] > 0) {
        requests.push_back(comm.irecv(
            {reinterpret_cast<std::byte*>(all.row<float>(offset)), counts[r] * row_bytes}, r,
            kTag));
      }
      offset += counts[r];
    }
    wait_all(requests);
    Tensor y_true(total, t), y_score(total, t);
    for (std::int64_t i = 0; i < total; ++i) {
      std::copy_n(all.row<float>(i), t, y_true.row<float>(i));
      std::copy_n(all.row<float>(i) + t, t, y_score.row<float>(i));
    }
    value = mean_rocauc(y_true, y_score);
  } else if (n > 0) {
    comm.isend({reinterpret_cast<const std::byte*>(local.raw()), local.bytes()}, 0, kTag,
               TrafficCategory::Setup)
        ->wait();
  }
  comm.broadcast({reinterpret_cast<std::byte*>(&value), sizeof value}, 0, TrafficCategory::Setup);
  return value;
}

// TESSERA_FAULT_INJECT=RANK:EPOCH makes that rank throw at the start of that epoch of every
// run: how the tests check that one rank failing inside the training loop ends the whole job.
struct FaultInjection {
  int rank = -1;
  int epoch = -1;
};

FaultInjection fault_injection_from_env() {
  FaultInjection f;
  const char* text = std::getenv("TESSERA_FAULT_INJECT");
  if (text == nullptr || *text == '\0') return f;
  TESSERA_CHECK(std::sscanf(text, "%d:%d", &f.rank, &f.epoch) == 2 && f.rank >= 0 && f.epoch >= 1,
                InvalidArgument, "TESSERA_FAULT_INJECT='", text, "', expected RANK:EPOCH");
  return f;
}

}  // namespace

struct Trainer::Impl {
  GraphPart part;
  std::unique_ptr<Communicator> own_comm;  // the SelfCommunicator of a single-process trainer
  Communicator* comm = nullptr;
  std::unique_ptr<HaloExchange> exchange;
  std::unique_ptr<HaloPropagator> propagator;
  GraphContext context;
  GraphTotals totals;
  std::vector<NodeId> train_loss_rows;  // labelled training rows
  std::int64_t train_loss_terms = 0;    // over all ranks
  double all_reduce_s = 0.0;            // blocking all-reduce time since the last reset
  FaultInjection fault;
  std::unique_ptr<Model> model;
  Tensor logits, logp, d_logits;        // (N, C)
};

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

// Local set-up of this rank: checks, the normalised operator behind the overlapping
// propagator, the training rows. Returns this rank's number of loss terms.
std::int64_t Trainer::build_local() {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  GraphPart& part = s.part;
  const DatasetInfo& data = part.dataset;
  validate(config_);
  TESSERA_CHECK(part.graph.num_parts == comm.size() && part.graph.part == comm.rank(),
                InvalidArgument, "part ", part.graph.part, " of ", part.graph.num_parts,
                " given to rank ", comm.rank(), " of ", comm.size());
  validate(part, "part " + std::to_string(part.graph.part));
  TESSERA_CHECK(data.num_outputs() > 0, InvalidInput, "dataset '", data.name,
                "' has no classes or tasks");
  if (config_.threads > 0) set_num_threads(config_.threads);
  s.fault = fault_injection_from_env();
  if (config_.normalize_features) row_normalize(part.features);

  LocalGraph& g = part.graph;
  ExchangeCodecs codecs;
  codecs.adaptive = config_.codec == "adaptive";
  codecs.forward = codecs.adaptive ? CodecKind::None : parse_codec(config_.codec);
  codecs.backward =
      config_.codec_backward.empty() ? codecs.forward : parse_codec(config_.codec_backward);
  codecs.error_feedback = config_.error_feedback;
  codecs.bit_budget = config_.bit_budget;
  codecs.num_layers = config_.num_layers;
  s.exchange = std::make_unique<HaloExchange>(comm, g.halo, g.owned_ids, g.halo_ids, codecs);
  if (config_.model == ModelKind::Gcn) {
    // D^-1/2 (A + I) D^-1/2 with global degrees: the owned block is symmetric.
    const Csr normalized = gcn_normalized(
        g.adjacency.with_self_loops(),
        std::span<const float>(g.degrees).first(static_cast<std::size_t>(g.num_owned())),
        g.degrees);
    s.propagator =
        std::make_unique<HaloPropagator>(normalized, MatrixSymmetry::Symmetric, *s.exchange);
    s.context.gcn = s.propagator.get();
  } else {
    const Csr normalized = mean_normalized(g.adjacency);
    s.propagator =
        std::make_unique<HaloPropagator>(normalized, MatrixSymmetry::General, *s.exchange);
    s.context.mean = s.propagator.get();
  }
  s.context.global_ids = g.owned_ids;
  s.context.global_num_nodes = data.num_nodes;
  s.context.all_reduce = [&s](std::span<double> values) {
    Stopwatch reduce;
    s.comm->all_reduce_sum(values, TrafficCategory::AllReduce);
    s.all_reduce_s += reduce.seconds();
  };

  std::int64_t terms = 0;
  if (data.task == TaskType::MultiClass) {
    for (NodeId v : part.train_rows)
      if (part.labels[v] >= 0) s.train_loss_rows.push_back(v);
    terms = static_cast<std::int64_t>(s.train_loss_rows.size());
  } else {
    s.train_loss_rows = part.train_rows;
    const std::int64_t t = part.targets.cols();
    for (NodeId v : part.train_rows)
      for (std::int64_t j = 0; j < t; ++j)
        if (!std::isnan(part.targets.row<float>(v)[j])) ++terms;
  }
  return terms;
}

void Trainer::setup() {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  const GraphPart& part = s.part;
  Stopwatch watch;
  // The local work is agreed first, so that no rank enters the all-reduce below alone.
  const std::int64_t local_terms =
      run_agreed(comm, "building the graph operator", [&] { return build_local(); });
  std::vector<double> sums = {static_cast<double>(local_terms),
                              static_cast<double>(part.train_rows.size()),
                              static_cast<double>(part.valid_rows.size()),
                              static_cast<double>(part.test_rows.size()),
                              static_cast<double>(s.propagator->nnz())};
  comm.all_reduce_sum(std::span<double>(sums), TrafficCategory::Setup);
  s.train_loss_terms = static_cast<std::int64_t>(sums[0]);
  s.totals = {static_cast<std::int64_t>(sums[1]), static_cast<std::int64_t>(sums[2]),
              static_cast<std::int64_t>(sums[3]), static_cast<std::int64_t>(sums[4])};
  TESSERA_CHECK(s.train_loss_terms > 0, InvalidInput, "dataset '", part.dataset.name,
                "' has no labelled training node");
  setup_s_ = watch.seconds();
}

Trainer::~Trainer() = default;

const Model& Trainer::model() const {
  TESSERA_CHECK(impl_->model != nullptr, InvalidArgument, "no run has been trained yet");
  return *impl_->model;
}
const GraphPart& Trainer::part() const { return impl_->part; }
const GraphTotals& Trainer::totals() const { return impl_->totals; }

RunResult Trainer::train_run(int run, const EpochCallback& on_epoch) {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  const GraphPart& part = s.part;
  const DatasetInfo& data = part.dataset;
  ModelConfig model_config;
  model_config.kind = config_.model;
  model_config.in_channels = data.num_features;
  model_config.hidden_channels = config_.hidden_channels;
  model_config.out_channels = data.num_outputs();
  model_config.num_layers = config_.num_layers;
  model_config.dropout = config_.dropout;
  model_config.input_dropout = config_.input_dropout;
  model_config.batch_norm = config_.batch_norm;
  model_config.seed = config_.seed + static_cast<std::uint64_t>(run);
  s.model = std::make_unique<Model>(model_config);
  Model& model = *s.model;
  Adam adam(AdamConfig{.lr = config_.lr, .weight_decay = config_.weight_decay}, model.param_info(),
            static_cast<std::int64_t>(model.params().size()));

  const bool multiclass = data.task == TaskType::MultiClass;
  const float loss_scale = 1.0f / static_cast<float>(s.train_loss_terms);
  constexpr int kCategories = static_cast<int>(TrafficCategory::Count);
  RunResult result;
  result.run = run;
  result.seed = model_config.seed;
  result.best_valid = -1.0;
  std::array<double, kCategories> bytes_total{}, raw_total{};
  s.exchange->reset_residuals();
  for (int epoch = 1; epoch <= config_.epochs; ++epoch) {
    EpochRecord record;
    record.run = run;
    record.epoch = epoch;
    s.exchange->reset_times();
    s.exchange->set_noise(model_config.seed, static_cast<std::uint64_t>(epoch));
    if (s.exchange->codecs().adaptive && epoch > 1 && (epoch - 1) % config_.replan_every == 0) {
      record.bit_plan = s.exchange->replan();
    }
    s.all_reduce_s = 0.0;
    const TrafficCounter traffic_before = comm.traffic();
    TESSERA_CHECK(!(s.fault.rank == comm.rank() && s.fault.epoch == epoch), Internal,
                  "fault injected at epoch ", epoch, " (TESSERA_FAULT_INJECT)");
    Stopwatch step;
    model.zero_grad();
    model.forward(s.logits, part.features, s.context, /*training=*/true, epoch);
    s.d_logits.resize(s.logits.rows(), s.logits.cols());
    double loss_sum = 0.0;
    if (multiclass) {
      s.logp.resize(s.logits.rows(), s.logits.cols());
      log_softmax_forward(s.logp, s.logits);
      loss_sum = nll_loss_sum(s.logp, part.labels, s.train_loss_rows);
      log_softmax_nll_backward(s.d_logits, s.logp, part.labels, s.train_loss_rows, loss_scale);
    } else {
      std::int64_t terms = 0;
      loss_sum = sigmoid_bce_loss_sum(s.logits, part.targets, s.train_loss_rows, &terms);
      sigmoid_bce_backward(s.d_logits, s.logits, part.targets, s.train_loss_rows, loss_scale);
    }
    model.backward(s.d_logits, s.context);
    {
      Stopwatch reduce;
      comm.all_reduce_sum(model.grads(), TrafficCategory::AllReduce);
      s.all_reduce_s += reduce.seconds();
    }
    adam.step(model.params(), model.grads());
    record.epoch_s = step.seconds();

    // One all-reduce for the loss and the step's communication figures (means over ranks).
    const ExchangeTimes& times = s.exchange->times();
    std::vector<double> step_sums = {loss_sum, times.comm_s + s.all_reduce_s, times.hidden_s(),
                                     times.encode_s, times.decode_s};
    constexpr int kFirstBytes = 5;
    for (int c = 0; c < kCategories; ++c) {
      const auto category = static_cast<TrafficCategory>(c);
      step_sums.push_back(
          static_cast<double>(comm.traffic().sent(category) - traffic_before.sent(category)));
      step_sums.push_back(
          static_cast<double>(comm.traffic().raw(category) - traffic_before.raw(category)));
    }
    comm.all_reduce_sum(std::span<double>(step_sums), TrafficCategory::Setup);
    const double k = comm.size();
    record.loss = step_sums[0] * static_cast<double>(loss_scale);
    record.comm_s = step_sums[1] / k;
    record.comm_hidden_s = step_sums[2] / k;
    record.encode_s = step_sums[3] / k;
    record.decode_s = step_sums[4] / k;
    for (int c = 0; c < kCategories; ++c) {
      record.bytes[c] = static_cast<std::uint64_t>(step_sums[kFirstBytes + 2 * c]);
      record.raw_bytes[c] = static_cast<std::uint64_t>(step_sums[kFirstBytes + 2 * c + 1]);
      bytes_total[c] += step_sums[kFirstBytes + 2 * c];
      raw_total[c] += step_sums[kFirstBytes + 2 * c + 1];
    }
    TESSERA_CHECK(std::isfinite(record.loss), InvalidInput, "training diverged: loss is ",
                  record.loss, " at epoch ", epoch, " (try a smaller --lr)");
    result.epoch_seconds.push_back(record.epoch_s);
    result.comm_seconds.push_back(record.comm_s);
    result.hidden_seconds.push_back(record.comm_hidden_s);
    result.encode_seconds.push_back(record.encode_s);
    result.decode_seconds.push_back(record.decode_s);
    result.final_loss = record.loss;

    if (epoch % config_.eval_every == 0 || epoch == config_.epochs) {
      Stopwatch eval;
      model.forward(s.logits, part.features, s.context, /*training=*/false, epoch);
      if (multiclass) {
        const AccuracyCounts splits[3] = {split_counts(s.logits, part.labels, part.train_rows),
                                          split_counts(s.logits, part.labels, part.valid_rows),
                                          split_counts(s.logits, part.labels, part.test_rows)};
        std::vector<double> counts;
        for (const AccuracyCounts& c : splits) {
          counts.push_back(static_cast<double>(c.labelled));
          counts.push_back(static_cast<double>(c.correct));
        }
        comm.all_reduce_sum(std::span<double>(counts), TrafficCategory::Setup);
        auto acc = [&](int i) { return counts[2 * i] > 0 ? counts[2 * i + 1] / counts[2 * i] : 0.0; };
        record.train_metric = acc(0);
        record.valid_metric = acc(1);
        record.test_metric = acc(2);
      } else {
        record.train_metric = split_rocauc(comm, s.logits, part.targets, part.train_rows);
        record.valid_metric = split_rocauc(comm, s.logits, part.targets, part.valid_rows);
        record.test_metric = split_rocauc(comm, s.logits, part.targets, part.test_rows);
      }
      record.evaluated = true;
      record.eval_s = eval.seconds();
      if (record.valid_metric > result.best_valid) {
        result.best_valid = record.valid_metric;
        result.test_at_best_valid = record.test_metric;
        result.train_at_best_valid = record.train_metric;
        result.best_epoch = epoch;
      }
      result.final_train = record.train_metric;
      result.final_valid = record.valid_metric;
      result.final_test = record.test_metric;
    }
    if (on_epoch) on_epoch(record);
  }
  for (int c = 0; c < kCategories; ++c) {
    result.bytes_per_epoch[c] = static_cast<std::uint64_t>(bytes_total[c] / config_.epochs);
    result.raw_bytes_per_epoch[c] = static_cast<std::uint64_t>(raw_total[c] / config_.epochs);
  }
  return result;
}

}  // namespace tessera
