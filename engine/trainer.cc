// The single-process full-graph training loop: graph operators built once, then per epoch one
// forward/backward over the whole graph, an Adam step and (every eval_every epochs) an
// evaluation of train/valid/test with the dataset's OGB metric.
#include "engine/trainer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "datasets/evaluator.h"
#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/core/kernels.h"
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
  Device device = parse_device(c.device);
  TESSERA_CHECK(device.kind == DeviceKind::Cpu, InvalidArgument, "--device ", c.device,
                ": only the CPU backend is available in this build");
}

namespace {

std::vector<NodeId> to_rows(const std::vector<GlobalId>& ids) {
  return std::vector<NodeId>(ids.begin(), ids.end());
}

// Labels of the split rows and the model's class predictions (argmax) for them.
double split_accuracy(const Tensor& logits, const std::vector<std::int64_t>& labels,
                      const std::vector<NodeId>& rows) {
  std::vector<std::int64_t> y_true(rows.size()), y_pred(rows.size());
  const std::int64_t c = logits.cols();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const float* row = logits.row<float>(rows[i]);
    y_true[i] = labels[rows[i]];
    y_pred[i] = std::max_element(row, row + c) - row;
  }
  return accuracy(y_true, y_pred);
}

double split_rocauc(const Tensor& logits, const Tensor& targets, const std::vector<NodeId>& rows) {
  Tensor y_true(static_cast<std::int64_t>(rows.size()), targets.cols());
  Tensor y_score(static_cast<std::int64_t>(rows.size()), logits.cols());
  gather_rows(y_true, targets, rows);
  gather_rows(y_score, logits, rows);
  return mean_rocauc(y_true, y_score);
}

}  // namespace

struct Trainer::Impl {
  Tensor normalized_features;      // (N, F) row-normalised copy, only with normalize_features
  const Tensor* features = nullptr;  // (N, F) what the model reads: the dataset's or the copy
  std::unique_ptr<Propagator> propagator;
  std::vector<GlobalId> global_ids;  // (N) identity on one process
  std::vector<NodeId> train_rows, valid_rows, test_rows;
  std::vector<NodeId> train_loss_rows;  // labelled training rows
  std::int64_t train_loss_terms = 0;
  GraphContext context;
  std::unique_ptr<Model> model;
  Tensor logits, logp, d_logits;    // (N, C)
};

Trainer::Trainer(const TrainConfig& config, const Dataset& dataset)
    : config_(config), dataset_(dataset), impl_(std::make_unique<Impl>()) {
  validate(config_);
  TESSERA_CHECK(dataset.num_nodes() > 0, InvalidInput, "dataset '", dataset.name, "' has no nodes");
  TESSERA_CHECK(dataset.num_outputs() > 0, InvalidInput, "dataset '", dataset.name,
                "' has no classes or tasks");
  if (config_.threads > 0) set_num_threads(config_.threads);
  Stopwatch watch;
  Impl& s = *impl_;
  s.features = &dataset.features;
  if (config_.normalize_features) {
    s.normalized_features = dataset.features.clone();
    row_normalize(s.normalized_features);
    s.features = &s.normalized_features;
  }
  // OGB's examples train on the symmetrised graph (adj_t.to_symmetric()); so does Tessera.
  Csr symmetric = dataset.graph.without_self_loops().symmetrize();
  if (config_.model == ModelKind::Gcn) {
    Csr normalized = gcn_normalized(symmetric.with_self_loops());
    num_graph_edges_ = normalized.nnz();
    // Symmetric pattern and weights 1/sqrt(d_u d_v): backward reuses A as A^T.
    s.propagator = std::make_unique<LocalPropagator>(std::move(normalized), MatrixSymmetry::Symmetric);
    s.context.gcn = s.propagator.get();
  } else {
    Csr normalized = mean_normalized(symmetric);
    num_graph_edges_ = normalized.nnz();
    s.propagator = std::make_unique<LocalPropagator>(std::move(normalized));
    s.context.mean = s.propagator.get();
  }
  s.global_ids.resize(static_cast<std::size_t>(dataset.num_nodes()));
  std::iota(s.global_ids.begin(), s.global_ids.end(), GlobalId{0});
  s.context.global_ids = s.global_ids;
  s.context.global_num_nodes = dataset.num_nodes();

  s.train_rows = to_rows(dataset.train_idx);
  s.valid_rows = to_rows(dataset.valid_idx);
  s.test_rows = to_rows(dataset.test_idx);
  if (dataset.task == TaskType::MultiClass) {
    for (NodeId v : s.train_rows)
      if (dataset.labels[v] >= 0) s.train_loss_rows.push_back(v);
    s.train_loss_terms = static_cast<std::int64_t>(s.train_loss_rows.size());
  } else {
    s.train_loss_rows = s.train_rows;
    const std::int64_t t = dataset.targets.cols();
    for (NodeId v : s.train_rows)
      for (std::int64_t j = 0; j < t; ++j)
        if (!std::isnan(dataset.targets.row<float>(v)[j])) ++s.train_loss_terms;
  }
  TESSERA_CHECK(s.train_loss_terms > 0, InvalidInput, "dataset '", dataset.name,
                "' has no labelled training node");
  setup_s_ = watch.seconds();
}

Trainer::~Trainer() = default;

const Model& Trainer::model() const {
  TESSERA_CHECK(impl_->model != nullptr, InvalidArgument, "no run has been trained yet");
  return *impl_->model;
}

RunResult Trainer::train_run(int run, const EpochCallback& on_epoch) {
  Impl& s = *impl_;
  const Dataset& data = dataset_;
  ModelConfig model_config;
  model_config.kind = config_.model;
  model_config.in_channels = data.num_features();
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
  RunResult result;
  result.run = run;
  result.seed = model_config.seed;
  result.best_valid = -1.0;
  for (int epoch = 1; epoch <= config_.epochs; ++epoch) {
    EpochRecord record;
    record.run = run;
    record.epoch = epoch;
    Stopwatch step;
    model.zero_grad();
    model.forward(s.logits, *s.features, s.context, /*training=*/true, epoch);
    s.d_logits.resize(s.logits.rows(), s.logits.cols());
    double loss_sum = 0.0;
    if (multiclass) {
      s.logp.resize(s.logits.rows(), s.logits.cols());
      log_softmax_forward(s.logp, s.logits);
      loss_sum = nll_loss_sum(s.logp, data.labels, s.train_loss_rows);
      log_softmax_nll_backward(s.d_logits, s.logp, data.labels, s.train_loss_rows, loss_scale);
    } else {
      std::int64_t terms = 0;
      loss_sum = sigmoid_bce_loss_sum(s.logits, data.targets, s.train_loss_rows, &terms);
      sigmoid_bce_backward(s.d_logits, s.logits, data.targets, s.train_loss_rows, loss_scale);
    }
    model.backward(s.d_logits, s.context);
    adam.step(model.params(), model.grads());
    record.epoch_s = step.seconds();
    record.loss = loss_sum * static_cast<double>(loss_scale);
    TESSERA_CHECK(std::isfinite(record.loss), InvalidInput, "training diverged: loss is ",
                  record.loss, " at epoch ", epoch, " (try a smaller --lr)");
    result.epoch_seconds.push_back(record.epoch_s);
    result.final_loss = record.loss;

    if (epoch % config_.eval_every == 0 || epoch == config_.epochs) {
      Stopwatch eval;
      model.forward(s.logits, *s.features, s.context, /*training=*/false, epoch);
      if (multiclass) {
        record.train_metric = split_accuracy(s.logits, data.labels, s.train_rows);
        record.valid_metric = split_accuracy(s.logits, data.labels, s.valid_rows);
        record.test_metric = split_accuracy(s.logits, data.labels, s.test_rows);
      } else {
        record.train_metric = split_rocauc(s.logits, data.targets, s.train_rows);
        record.valid_metric = split_rocauc(s.logits, data.targets, s.valid_rows);
        record.test_metric = split_rocauc(s.logits, data.targets, s.test_rows);
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
  return result;
}

}  // namespace tessera
