// Model: the layer stack of OGB's node-property examples over gcn/sage/batch_norm layers:
//   [input dropout] -> conv_0 -> [BN] -> ReLU -> dropout -> ... -> conv_{L-1} -> logits.
// Parameters: one flat buffer, per layer "convs.l.weight" (F_in, F_out), "convs.l.bias" (F_out),
// "convs.l.root_weight" (SAGE), then "bns.l.weight"/"bns.l.bias" (gamma/beta). Only conv
// weights (weight, root_weight) get decay=true: biases and BN affine parameters are not decayed.
#include "layers/model.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/core/kernels.h"
#include "engine/core/rng.h"
#include "layers/batch_norm.h"
#include "layers/gcn.h"
#include "layers/sage.h"

namespace tessera {

ModelKind parse_model_kind(const std::string& text) {
  if (text == "gcn") return ModelKind::Gcn;
  if (text == "sage") return ModelKind::Sage;
  TESSERA_FAIL(InvalidArgument, "model kind: expected 'gcn' or 'sage', got '", text, "'");
}

std::string to_string(ModelKind kind) { return kind == ModelKind::Gcn ? "gcn" : "sage"; }

// Everything forward keeps for backward, and the workspaces reused from epoch to epoch.
struct Model::State {
  struct Layer {
    std::int64_t f_in = 0, f_out = 0;
    std::int64_t weight_at = 0, bias_at = 0, root_weight_at = -1;  // offsets in params_/grads_
    std::int64_t gamma_at = -1, beta_at = -1;                      // (F_out) BN affine
    std::int64_t running_mean_at = -1, running_var_at = -1;        // offsets in buffers_
    Tensor weight, root_weight;      // (F_in, F_out) copies of params_, refreshed every forward
    Tensor d_weight, d_root_weight;  // (F_in, F_out) copies of grads_ during backward
    GcnCache gcn;
    SageCache sage;
    Tensor conv_out;  // (N, F_out) conv output: ReLU applied (hidden, no BN), pre-BN (hidden,
                      // BN) or the logits (last layer)
    BatchNormCache bn;
    Tensor bn_out;   // (N, F_out) ReLU(BN(conv_out)), ReLU in place (hidden layers with BN)
    Tensor dropped;  // (N, F_out) dropout of the embedding (training, dropout > 0, hidden)

    // conv_out = conv(x), weights copied from the flat params first.
    void conv_forward(ModelKind kind, std::span<const float> params, const Tensor& x,
                      Activation act, Propagator& propagator, int l);
    // Accumulates this conv's parameter gradients into the flat grads; d_x as in gcn_backward.
    void conv_backward(ModelKind kind, std::span<float> grads, Tensor* d_x, const Tensor& d_out,
                       const Tensor& x, Activation act, Propagator& propagator, int l);
  };
  std::vector<Layer> layers;
  Tensor input_dropped;              // (N, F_in) features after input dropout
  const Tensor* features = nullptr;  // input of the last forward; not owned
  bool has_forward = false;          // embeddings() valid
  bool backward_ready = false;       // last forward was a training one, not yet backpropagated
  bool input_dropout_used = false;   // ... with input dropout
  bool dropout_used = false;         // ... with dropout after the hidden layers
  std::int64_t epoch = 0;            // of the last forward: keys the dropout masks
  Tensor grad_a, grad_b;             // (N, F_hidden) ping-pong activation gradients

  // What conv l read in the last forward: the (dropped-out) features or layer l-1's output.
  const Tensor& conv_input(int l, bool batch_norm) const {
    if (l == 0) return input_dropout_used ? input_dropped : *features;
    const Layer& prev = layers[static_cast<std::size_t>(l - 1)];
    if (dropout_used) return prev.dropped;
    return batch_norm ? prev.bn_out : prev.conv_out;
  }
};

namespace {

// Dropout keys: input dropout uses layer key 0, the dropout after conv l uses l + 1.
CounterRng dropout_rng(std::uint64_t seed, std::int64_t epoch, int key) {
  return CounterRng(seed, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(key),
                    RngPurpose::Dropout);
}

// Glorot (Xavier) uniform in [-b, b], b = sqrt(6 / (F_in + F_out)); `which` separates the
// tensors of one layer (0 weight, 1 root weight) in the layer's Init stream.
void glorot_uniform(std::span<float> w, std::int64_t f_in, std::int64_t f_out,
                    const CounterRng& rng, std::uint64_t which) {
  const double bound = std::sqrt(6.0 / static_cast<double>(f_in + f_out));
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(bound * (2.0 * rng.uniform(which, i) - 1.0));
}

void copy_into(Tensor& dst, std::span<const float> src, std::int64_t rows, std::int64_t cols) {
  dst.resize(rows, cols);
  std::copy(src.begin(), src.end(), dst.f32());
}

void copy_out(std::span<float> dst, const Tensor& src) {
  std::copy(src.f32(), src.f32() + src.numel(), dst.begin());
}

}  // namespace

void Model::State::Layer::conv_forward(ModelKind kind, std::span<const float> params,
                                       const Tensor& x, Activation act, Propagator& propagator,
                                       int l) {
  const auto w_size = static_cast<std::size_t>(f_in * f_out);
  copy_into(weight, params.subspan(static_cast<std::size_t>(weight_at), w_size), f_in, f_out);
  std::span<const float> bias =
      params.subspan(static_cast<std::size_t>(bias_at), static_cast<std::size_t>(f_out));
  if (kind == ModelKind::Gcn) {
    gcn_forward(conv_out, gcn, x, weight, bias, act, propagator, l);
    return;
  }
  copy_into(root_weight, params.subspan(static_cast<std::size_t>(root_weight_at), w_size), f_in,
            f_out);
  sage_forward(conv_out, sage, x, weight, bias, root_weight, act, propagator, l);
}

void Model::State::Layer::conv_backward(ModelKind kind, std::span<float> grads, Tensor* d_x,
                                        const Tensor& d_out, const Tensor& x, Activation act,
                                        Propagator& propagator, int l) {
  const auto w_size = static_cast<std::size_t>(f_in * f_out);
  std::span<float> d_w = grads.subspan(static_cast<std::size_t>(weight_at), w_size);
  std::span<float> d_bias =
      grads.subspan(static_cast<std::size_t>(bias_at), static_cast<std::size_t>(f_out));
  copy_into(d_weight, d_w, f_in, f_out);  // gemm accumulates into a Tensor
  if (kind == ModelKind::Gcn) {
    gcn_backward(d_x, d_weight, d_bias, gcn, d_out, x, conv_out, weight, act, propagator, l);
  } else {
    std::span<float> d_root = grads.subspan(static_cast<std::size_t>(root_weight_at), w_size);
    copy_into(d_root_weight, d_root, f_in, f_out);
    sage_backward(d_x, d_weight, d_bias, d_root_weight, sage, d_out, x, conv_out, weight,
                  root_weight, act, propagator, l);
    copy_out(d_root, d_root_weight);
  }
  copy_out(d_w, d_weight);
}

Model::Model(const ModelConfig& config) : config_(config), state_(std::make_unique<State>()) {
  const ModelConfig& c = config_;
  TESSERA_CHECK(c.num_layers >= 1, InvalidArgument, "num_layers must be >= 1, got ",
                c.num_layers);
  TESSERA_CHECK(c.in_channels >= 1 && c.out_channels >= 1, InvalidArgument,
                "in_channels and out_channels must be >= 1, got ", c.in_channels, " and ",
                c.out_channels);
  TESSERA_CHECK(c.num_layers == 1 || c.hidden_channels >= 1, InvalidArgument,
                "hidden_channels must be >= 1, got ", c.hidden_channels);
  TESSERA_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, InvalidArgument,
                "dropout must be in [0, 1), got ", c.dropout);
  TESSERA_CHECK(c.input_dropout >= 0.0f && c.input_dropout < 1.0f, InvalidArgument,
                "input_dropout must be in [0, 1), got ", c.input_dropout);

  auto add_param = [&](const std::string& name, std::int64_t rows, std::int64_t cols,
                       bool decay) {
    const auto offset = static_cast<std::int64_t>(params_.size());
    param_info_.push_back({name, offset, rows, cols, decay});
    params_.resize(params_.size() + static_cast<std::size_t>(rows * cols), 0.0f);
    return offset;
  };
  auto add_buffer = [&](const std::string& name, std::int64_t cols, float value) {
    const auto offset = static_cast<std::int64_t>(buffers_.size());
    buffer_info_.push_back({name, offset, 1, cols, false});
    buffers_.resize(buffers_.size() + static_cast<std::size_t>(cols), value);
    return offset;
  };

  state_->layers.resize(static_cast<std::size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    State::Layer& layer = state_->layers[static_cast<std::size_t>(l)];
    layer.f_in = l == 0 ? c.in_channels : c.hidden_channels;
    layer.f_out = l + 1 == c.num_layers ? c.out_channels : c.hidden_channels;
    const std::string prefix = "convs." + std::to_string(l) + ".";
    layer.weight_at = add_param(prefix + "weight", layer.f_in, layer.f_out, true);
    layer.bias_at = add_param(prefix + "bias", 1, layer.f_out, false);
    if (c.kind == ModelKind::Sage)
      layer.root_weight_at = add_param(prefix + "root_weight", layer.f_in, layer.f_out, true);
  }
  for (int l = 0; l + 1 < c.num_layers && c.batch_norm; ++l) {
    State::Layer& layer = state_->layers[static_cast<std::size_t>(l)];
    const std::string prefix = "bns." + std::to_string(l) + ".";
    layer.gamma_at = add_param(prefix + "weight", 1, layer.f_out, false);
    layer.beta_at = add_param(prefix + "bias", 1, layer.f_out, false);
    layer.running_mean_at = add_buffer(prefix + "running_mean", layer.f_out, 0.0f);
    layer.running_var_at = add_buffer(prefix + "running_var", layer.f_out, 1.0f);
  }
  grads_.assign(params_.size(), 0.0f);

  // Glorot-uniform weights, zero biases, gamma 1, beta 0; deterministic from the seed.
  std::span<float> p(params_);
  for (int l = 0; l < c.num_layers; ++l) {
    const State::Layer& layer = state_->layers[static_cast<std::size_t>(l)];
    const CounterRng rng(c.seed, 0, static_cast<std::uint64_t>(l), RngPurpose::Init);
    const auto size = static_cast<std::size_t>(layer.f_in * layer.f_out);
    glorot_uniform(p.subspan(static_cast<std::size_t>(layer.weight_at), size), layer.f_in,
                   layer.f_out, rng, 0);
    if (layer.root_weight_at >= 0)
      glorot_uniform(p.subspan(static_cast<std::size_t>(layer.root_weight_at), size),
                     layer.f_in, layer.f_out, rng, 1);
    if (layer.gamma_at >= 0)
      std::fill_n(p.begin() + layer.gamma_at, layer.f_out, 1.0f);
  }
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

void Model::zero_grad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void Model::forward(Tensor& logits, const Tensor& features, GraphContext& graph, bool training,
                    std::int64_t epoch) {
  const ModelConfig& c = config_;
  State& s = *state_;
  Propagator* propagator = c.kind == ModelKind::Gcn ? graph.gcn : graph.mean;
  TESSERA_CHECK(propagator != nullptr, InvalidArgument, "GraphContext has no ",
                c.kind == ModelKind::Gcn ? "gcn" : "mean", " propagator for a ", to_string(c.kind),
                " model");
  const std::int64_t n = features.rows();
  check_shape(features, propagator->num_rows(), c.in_channels, "Model::forward features");
  s.input_dropout_used = training && c.input_dropout > 0.0f;
  s.dropout_used = training && c.dropout > 0.0f && c.num_layers > 1;
  if (s.input_dropout_used || s.dropout_used)
    TESSERA_CHECK(static_cast<std::int64_t>(graph.global_ids.size()) == n, InvalidArgument,
                  "GraphContext::global_ids: expected ", n, " ids (dropout keys), got ",
                  graph.global_ids.size());
  if (training && c.batch_norm && c.num_layers > 1)
    TESSERA_CHECK(graph.global_num_nodes >= n, InvalidArgument,
                  "GraphContext::global_num_nodes must count the rows of all ranks (>= ", n,
                  "), got ", graph.global_num_nodes);
  s.features = &features;
  s.backward_ready = false;
  s.epoch = epoch;
  s.has_forward = false;  // until this forward completes

  std::span<const float> p(params_);
  const Tensor* h = &features;  // (N, F_in of layer l): the input of the next conv
  if (s.input_dropout_used) {
    s.input_dropped.resize(n, c.in_channels);
    dropout_forward(s.input_dropped, features, c.input_dropout, dropout_rng(c.seed, epoch, 0),
                    graph.global_ids);
    h = &s.input_dropped;
  }
  for (int l = 0; l < c.num_layers; ++l) {
    State::Layer& layer = s.layers[static_cast<std::size_t>(l)];
    const bool hidden = l + 1 < c.num_layers;
    const bool bn = hidden && c.batch_norm;
    const Activation act = hidden && !bn ? Activation::Relu : Activation::None;
    layer.conv_forward(c.kind, p, *h, act, *propagator, l);
    h = &layer.conv_out;
    if (bn) {
      const auto f = static_cast<std::size_t>(layer.f_out);
      std::span<float> buffers(buffers_);
      batch_norm1d_forward(layer.bn_out, layer.bn,
                           buffers.subspan(static_cast<std::size_t>(layer.running_mean_at), f),
                           buffers.subspan(static_cast<std::size_t>(layer.running_var_at), f),
                           layer.conv_out, p.subspan(static_cast<std::size_t>(layer.gamma_at), f),
                           p.subspan(static_cast<std::size_t>(layer.beta_at), f), training,
                           graph.global_num_nodes, graph.all_reduce);
      bias_act_forward(layer.bn_out, layer.bn_out, {}, Activation::Relu);
      h = &layer.bn_out;
    }
    if (hidden && s.dropout_used) {
      layer.dropped.resize(n, layer.f_out);
      dropout_forward(layer.dropped, *h, c.dropout, dropout_rng(c.seed, epoch, l + 1),
                      graph.global_ids);
      h = &layer.dropped;
    }
  }
  logits.resize(n, c.out_channels);  // (N, C)
  std::copy(h->f32(), h->f32() + h->numel(), logits.f32());
  s.has_forward = true;
  s.backward_ready = training;
}

void Model::backward(const Tensor& d_logits, GraphContext& graph) {
  const ModelConfig& c = config_;
  State& s = *state_;
  TESSERA_CHECK(s.backward_ready, InvalidArgument,
                "Model::backward needs a training forward before it (one backward per forward)");
  Propagator* propagator = c.kind == ModelKind::Gcn ? graph.gcn : graph.mean;
  TESSERA_CHECK(propagator != nullptr, InvalidArgument, "GraphContext has no propagator for a ",
                to_string(c.kind), " model");
  const std::int64_t n = s.features->rows();
  check_shape(d_logits, n, c.out_channels, "Model::backward d_logits");
  s.backward_ready = false;

  std::span<float> g(grads_);
  std::span<const float> p(params_);
  const Tensor* d_h = &d_logits;  // (N, F_out of layer l): gradient w.r.t. conv l's output
  for (int l = c.num_layers - 1; l >= 0; --l) {
    State::Layer& layer = s.layers[static_cast<std::size_t>(l)];
    const bool hidden = l + 1 < c.num_layers;
    const bool bn = hidden && c.batch_norm;
    const Activation act = hidden && !bn ? Activation::Relu : Activation::None;
    // Input of conv l in the forward, and where its gradient goes (none for the features).
    State::Layer* prev = l > 0 ? &s.layers[static_cast<std::size_t>(l - 1)] : nullptr;
    Tensor* d_x = prev ? (d_h == &s.grad_a ? &s.grad_b : &s.grad_a) : nullptr;
    layer.conv_backward(c.kind, g, d_x, *d_h, s.conv_input(l, c.batch_norm), act, *propagator, l);
    if (!prev) break;

    // Back through layer l-1's dropout, ReLU and batch norm, in place where the kernels allow.
    Tensor& d = *d_x;  // (N, F_hidden)
    if (s.dropout_used)
      dropout_backward(d, d, c.dropout, dropout_rng(c.seed, s.epoch, l), graph.global_ids);
    d_h = &d;
    if (c.batch_norm) {
      const auto f = static_cast<std::size_t>(prev->f_out);
      std::span<float> d_gamma = g.subspan(static_cast<std::size_t>(prev->gamma_at), f);
      std::span<float> d_beta = g.subspan(static_cast<std::size_t>(prev->beta_at), f);
      std::span<const float> gamma = p.subspan(static_cast<std::size_t>(prev->gamma_at), f);
      bias_act_backward(d, {}, d, prev->bn_out, Activation::Relu);
      Tensor& d_bn_in = &d == &s.grad_a ? s.grad_b : s.grad_a;  // (N, F_hidden)
      batch_norm1d_backward(d_bn_in, d_gamma, d_beta, prev->bn, d, gamma, graph.global_num_nodes,
                            graph.all_reduce);
      d_h = &d_bn_in;
    }
  }
}

const Tensor& Model::embeddings(int layer) const {
  TESSERA_CHECK(layer >= 0 && layer < config_.num_layers, InvalidArgument,
                "embeddings: layer must be in [0, ", config_.num_layers, "), got ", layer);
  TESSERA_CHECK(state_->has_forward, InvalidArgument, "embeddings: no forward has run yet");
  const State::Layer& l = state_->layers[static_cast<std::size_t>(layer)];
  const bool bn = config_.batch_norm && layer + 1 < config_.num_layers;
  return bn ? l.bn_out : l.conv_out;
}

}  // namespace tessera
