// SPDX-License-Identifier: Apache-2.0
// Model: the layer stack of OGB's node-property examples over the layers of one kind
// (layers/layer_kind.h) and batch norm:
//   [input dropout] -> conv_0 -> [BN] -> ReLU -> dropout -> conv_1 -> ... -> conv_{L-1} -> logits,
// written as dropout on each conv's input (the features with the input rate, layer l-1's output
// with the dropout rate, mask key l), so that a layer's output is the clean embedding the next
// layer (or pipeline stage) reads. ResGcn hidden layers l >= 1 add a scaled branch to their
// clean input: h_{l+1} = h_l + 0.1 ReLU(conv(dropout(h_l))). GCNII layers l >= 1 also read layer
// 0's clean output h0 (its initial residual) and add to its gradient.
// Parameters: one flat buffer, per layer what its kind declares as "convs.l.<name>" (GCN:
// "weight" (F_in, F_out), "bias" (F_out); SAGE adds "root_weight"), then "bns.l.weight"/
// "bns.l.bias" (gamma/beta). Decay follows the declarations (weights, not biases); batch-norm
// affine parameters are not decayed.
// A slice holds the same entries for its layers only, in the same order.
#include "layers/model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/kernels.h"
#include "core/rng.h"
#include "layers/batch_norm.h"

namespace tessera {

// h_{l+1} = kResidualSkip * h_l + kResidualBranch * branch: an identity path, and a branch
// scaled down so that the identity dominates at initialisation (as SkipInit / ReZero do): the
// scale of h stays put with depth (ReLU outputs are non-negative, so an unscaled branch grows it
// geometrically) and gradients reach the first layers. Measured on Cora, 200 epochs, 64 hidden:
// 0.1 gives 80-81% test at 8, 16 and 32 layers; 0.5 collapses past 8 layers, and averaging
// (0.5 / 0.5) starves the early layers of gradient past 8.
constexpr float kResidualBranch = 0.1f;
constexpr float kResidualSkip = 1.0f;

bool is_residual_layer(const ModelConfig& config, int layer) {
  const int total = config.total_layers > 0 ? config.total_layers : config.num_layers;
  return config.kind->residual && layer >= 1 && layer + 1 < total;
}

bool keeps_signs_only(const ModelConfig& c, int layer) {
  const int total = c.total_layers > 0 ? c.total_layers : c.num_layers;
  if (layer < 0 || layer + 1 >= total || c.batch_norm || is_residual_layer(c, layer) ||
      c.kind->initial_residual || c.kind->activation != Activation::Relu)
    return false;
  const std::int64_t next_out = layer + 2 < total ? c.hidden_channels : c.out_channels;
  return !c.kind->backward_reads_input(c.hidden_channels, next_out);
}

void GraphContext::set_propagator(const GraphOperator& op, Propagator* propagator) {
  for (auto& [known, p] : propagators_) {
    if (known == &op) {
      p = propagator;
      return;
    }
  }
  propagators_.emplace_back(&op, propagator);
}

Propagator* GraphContext::propagator(const GraphOperator& op) const {
  for (const auto& [known, p] : propagators_)
    if (known == &op) return p;
  return nullptr;
}

// A layer's place in the flat buffers, the same in every slot.
struct Model::LayerLayout {
  LayerShape shape;
  std::vector<std::int64_t> conv_at;                       // the kind's parameters
  std::int64_t gamma_at = -1, beta_at = -1;                // (F_out) BN affine
  std::int64_t running_mean_at = -1, running_var_at = -1;  // offsets in buffers_
  bool residual = false;                                   // mixes its input into its output
};

// Everything forward keeps for backward, and the workspaces reused from epoch to epoch.
struct Model::State {
  struct Layer {
    LayerLayout at;
    std::unique_ptr<Conv> conv;  // the kind's layer: its cache and weight copies
    Tensor conv_out;  // (N, F_out) conv output: ReLU applied (hidden, no BN), pre-BN (hidden,
                      // BN) or the logits (last layer)
    BatchNormCache bn;
    Tensor bn_out;   // (N, F_out) ReLU(BN(conv_out)), ReLU in place (hidden layers with BN)
    Tensor res_out;  // (N, F_out) the above mixed with the layer's input (residual layers)
    // (N, ceil(F_out / 8)) u8: the signs of conv_out, kept instead of it once the next layer has
    // read it (Model::keep_signs_only), when `signs_only`
    Tensor positive;
    bool signs_only = false;
    Tensor dropped;  // (N, F_in) the conv's input after dropout (when `dropout`) for a slice's
                     // first layer; the later layers use Workspace::dropped (see conv_input)
    const Tensor* stand_in = nullptr;  // the conv's stand-in for a freed `dropped`
    const Tensor* in = nullptr;        // the layer's input in the last forward (before dropout)
    bool dropout = false;              // the last forward dropped out the conv's input

    std::int64_t f_in() const { return at.shape.f_in; }
    std::int64_t f_out() const { return at.shape.f_out; }
    bool hidden() const { return at.shape.hidden(); }
    // Frees the activations and workspaces except `keep` (inference-only slots).
    void release(const Tensor* keep = nullptr) {
      for (Tensor* t : {&conv_out, &bn_out, &res_out, &dropped, &bn.x_hat, &positive})
        if (t != keep) *t = Tensor();
      conv->release();
    }
  };
  std::vector<Layer> layers;         // the slice's layers, in order
  const Tensor* features = nullptr;  // input of the last forward; not owned
  bool has_forward = false;          // embeddings() valid
  bool backward_ready = false;       // last forward was a training one, not yet backpropagated
  bool inference_only = false;       // set_inference_slot: keeps no activations
  const Tensor* initial = nullptr;   // (N, F_hidden) h0 of a slice after layer 0 (set_initial)
  std::int64_t epoch = 0;            // of the last forward: keys the dropout masks

  // Layer i's embedding (after activation and residual, before dropout).
  const Tensor& output(std::size_t i, bool batch_norm) const {
    const Layer& layer = layers[i];
    if (layer.at.residual) return layer.res_out;
    return batch_norm && layer.hidden() ? layer.bn_out : layer.conv_out;
  }
  // Whether layer i's dropped-out input lives in the shared Workspace::dropped: every layer
  // after a slice's first, whose input (the layer before's output) outlives the backward, so
  // that the backward can draw the same mask again. A slice's first layer keeps its own (a
  // pipeline stage's input is the caller's).
  bool shares_dropped(std::size_t i) const { return i > 0 && layers[i].dropout; }
};

// What a model keeps from its forward to its backward is one (N, F) output per layer (and the
// convs' caches). The dropped-out input of a layer is not kept: the layers after a slice's first
// write it into one shared workspace, which the backward fills again from the layer's input and
// the same counter-based mask when another layer has overwritten it since (the last layer's is
// still there; a GCN that aggregates first reads only its shape, from its stand-in P x). That
// keeps one (N, F) tensor for all layers instead of one per layer; the gradient before bias and
// activation is made in place in the layer's output gradient where that is the model's own.

// Workspaces shared by all slots (one forward or backward runs at a time): the convs' gradient
// before bias + activation, and one pool of (N, F_hidden) buffers for the rotating activation
// gradients of a backward and the layers' shared dropped-out input (State::shares_dropped).
// A backward takes the buffer holding a dropped-out input for a gradient once no conv reads it
// (it is drawn again from the same mask when one does): a GCN whose later layers aggregate
// first then keeps two such buffers instead of three.
struct Model::Workspace {
  Tensor pool[4];    // (N, F_hidden) at most: a gradient, its successor, a skip, the dropped input
  Tensor d_pre;      // (N, F_out)
  Tensor d_initial;  // (N, F_hidden) initial residual: the gradient of layer 0's output from the
                     // layers after it (Conv::set_initial)
  // The pool buffer holding a layer's input after dropout (written by the forward, and by the
  // backward when it draws it again), at the widest width it held; null when none does.
  Tensor* dropped = nullptr;
  // Whose dropped-out input `dropped` holds now: a layer of a slot's state, in one epoch.
  const State* dropped_state = nullptr;
  std::size_t dropped_layer = 0;
  std::int64_t dropped_epoch = -1;
  bool dropped_pinned = false;  // a conv's backward reads `dropped` now

  // A pool buffer that is none of the given ones: one already allocated if there is one, else
  // the dropped input's (unless pinned; it is drawn again when next read), else a new one.
  Tensor& take(const Tensor* a, const Tensor* b = nullptr) {
    Tensor* fresh = nullptr;
    for (Tensor& t : pool) {
      if (&t == a || &t == b || &t == dropped) continue;
      if (!t.empty()) return t;
      if (fresh == nullptr) fresh = &t;
    }
    if (dropped != nullptr && dropped != a && dropped != b && !dropped_pinned) {
      Tensor& t = *dropped;
      forget_dropped();
      return t;
    }
    return *fresh;  // four buffers, three taken at most
  }
  void forget_dropped() {
    dropped = nullptr;
    dropped_state = nullptr;
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

void check_model_config(const ModelConfig& c) {
  TESSERA_CHECK(c.num_layers >= 1, InvalidArgument, "num_layers must be >= 1, got ", c.num_layers);
  TESSERA_CHECK(c.first_layer >= 0 && c.first_layer + c.num_layers <= c.total_layers,
                InvalidArgument, "model slice: layers [", c.first_layer, ", ",
                c.first_layer + c.num_layers, ") do not fit a model of ", c.total_layers,
                " layers");
  TESSERA_CHECK(c.slots >= 1, InvalidArgument, "model slots must be >= 1, got ", c.slots);
  TESSERA_CHECK(c.in_channels >= 1 && c.out_channels >= 1, InvalidArgument,
                "in_channels and out_channels must be >= 1, got ", c.in_channels, " and ",
                c.out_channels);
  TESSERA_CHECK(c.total_layers == 1 || c.hidden_channels >= 1, InvalidArgument,
                "hidden_channels must be >= 1, got ", c.hidden_channels);
  TESSERA_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, InvalidArgument,
                "dropout must be in [0, 1), got ", c.dropout);
  TESSERA_CHECK(c.input_dropout >= 0.0f && c.input_dropout < 1.0f, InvalidArgument,
                "input_dropout must be in [0, 1), got ", c.input_dropout);
  if (c.kind->initial_residual) {
    TESSERA_CHECK(c.total_layers >= 3, InvalidArgument, "a ", to_string(c.kind),
                  " model needs >= 3 layers (dense input, at least one convolution, dense "
                  "output), got ",
                  c.total_layers);
  }
}

}  // namespace

std::vector<Model::LayerLayout> Model::lay_out() {
  const ModelConfig& c = config_;
  std::int64_t num_params = 0;
  auto add_param = [&](const std::string& name, std::int64_t rows, std::int64_t cols, bool decay,
                       bool dense = false) {
    const std::int64_t offset = num_params;
    param_info_.push_back({name, offset, rows, cols, decay, dense});
    num_params += rows * cols;
    return offset;
  };
  auto add_buffer = [&](const std::string& name, std::int64_t cols, float value) {
    const auto offset = static_cast<std::int64_t>(buffers_.size());
    buffer_info_.push_back({name, offset, 1, cols, false});
    buffers_.resize(buffers_.size() + static_cast<std::size_t>(cols), value);
    return offset;
  };
  std::vector<LayerLayout> layers(static_cast<std::size_t>(c.num_layers));
  std::vector<std::vector<ParamDecl>> declared(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    LayerLayout& layer = layers[i];
    const int l = c.first_layer + static_cast<int>(i);
    const bool hidden = l + 1 < c.total_layers;
    layer.shape = {l, c.total_layers, l == 0 ? c.in_channels : c.hidden_channels,
                   hidden ? c.hidden_channels : c.out_channels, c.hyper};
    layer.residual = is_residual_layer(c, l);
    declared[i] = c.kind->params(layer.shape);
    const std::string prefix = "convs." + std::to_string(l) + ".";
    for (const ParamDecl& d : declared[i])
      layer.conv_at.push_back(add_param(prefix + d.name, d.rows, d.cols, d.decay, d.dense));
  }
  for (std::size_t i = 0; i < layers.size() && c.batch_norm; ++i) {
    LayerLayout& layer = layers[i];
    if (!layer.shape.hidden()) continue;
    const std::string prefix = "bns." + std::to_string(layer.shape.layer) + ".";
    layer.gamma_at = add_param(prefix + "weight", 1, layer.shape.f_out, false);
    layer.beta_at = add_param(prefix + "bias", 1, layer.shape.f_out, false);
    layer.running_mean_at = add_buffer(prefix + "running_mean", layer.shape.f_out, 0.0f);
    layer.running_var_at = add_buffer(prefix + "running_var", layer.shape.f_out, 1.0f);
  }
  params_ = Tensor::zeros(1, num_params);
  grads_ = Tensor::zeros(1, num_params);
  // Glorot-uniform weights, zero biases, gamma 1, beta 0; deterministic from the seed and the
  // layer's index in the whole model.
  std::span<float> p = params();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerLayout& layer = layers[i];
    const CounterRng rng(c.seed, 0, static_cast<std::uint64_t>(layer.shape.layer),
                         RngPurpose::Init);
    for (std::size_t k = 0; k < declared[i].size(); ++k) {
      const ParamDecl& d = declared[i][k];
      if (d.init != ParamInit::Glorot) continue;
      glorot_uniform(p.subspan(static_cast<std::size_t>(layer.conv_at[k]),
                               static_cast<std::size_t>(d.rows * d.cols)),
                     d.rows, d.cols, rng, d.stream);
    }
    if (layer.gamma_at >= 0) std::fill_n(p.begin() + layer.gamma_at, layer.shape.f_out, 1.0f);
  }
  return layers;
}

Model::Model(const ModelConfig& config)
    : config_(config), workspace_(std::make_unique<Workspace>()) {
  if (config_.total_layers == 0) config_.total_layers = config_.first_layer + config_.num_layers;
  check_model_config(config_);
  const std::vector<LayerLayout> layers = lay_out();
  // Every slot gets the same layout (offsets, widths, flags) and its own activations.
  for (int slot = 0; slot < config_.slots; ++slot) {
    states_.push_back(std::make_unique<State>());
    std::vector<State::Layer>& own = states_.back()->layers;
    own.resize(layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      own[i].at = layers[i];
      own[i].conv = config_.kind->make(layers[i].shape, layers[i].conv_at);
    }
  }
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

void Model::zero_grad() { grads_.zero(); }

std::vector<float> Model::host_params() const { return host_f32(params_); }

void Model::set_params(std::span<const float> host_values) {
  TESSERA_CHECK(static_cast<std::int64_t>(host_values.size()) == params_.numel(), InvalidArgument,
                "Model::set_params: ", host_values.size(), " values for ", params_.numel(),
                " parameters");
  backend(params_.device()).copy(params_.raw(), host_values.data(), params_.bytes());
}

void Model::to(Device device) {
  if (device == params_.device()) return;
  params_ = params_.to(device);
  grads_ = grads_.to(device);
}

void Model::set_inference_slot(int slot) {
  TESSERA_CHECK(slot >= 0 && slot < config_.slots, InvalidArgument,
                "Model::set_inference_slot: slot ", slot, " of ", config_.slots);
  states_[static_cast<std::size_t>(slot)]->inference_only = true;
}

Propagator& Model::propagator_of(GraphContext& graph) const {
  const GraphOperator& op = *config_.kind->op;
  Propagator* propagator = graph.propagator(op);
  TESSERA_CHECK(propagator != nullptr, InvalidArgument, "GraphContext has no ", op.name,
                " propagator for a ", to_string(config_.kind), " model");
  return *propagator;
}

void Model::forward(Tensor& logits, const Tensor& features, GraphContext& graph, bool training,
                    std::int64_t epoch, int slot) {
  const ModelConfig& c = config_;
  TESSERA_CHECK(slot >= 0 && slot < c.slots, InvalidArgument, "Model::forward: slot ", slot,
                " of ", c.slots);
  State& s = *states_[static_cast<std::size_t>(slot)];
  TESSERA_CHECK(!training || !s.inference_only, InvalidArgument, "Model::forward: slot ", slot,
                " is inference only");
  const Propagator& propagator = propagator_of(graph);
  const std::int64_t n = features.rows();
  check_shape(features, propagator.num_rows(), s.layers.front().f_in(), "Model::forward features");
  // Dropout on each conv's input: the features (input dropout, key 0) or layer l-1's output
  // (key l): the same masks as dropout after each hidden layer.
  bool any_dropout = false;
  for (const State::Layer& layer : s.layers)
    any_dropout |= training && (layer.at.shape.layer == 0 ? c.input_dropout : c.dropout) > 0.0f;
  if (any_dropout)
    TESSERA_CHECK(static_cast<std::int64_t>(graph.global_ids.size()) == n, InvalidArgument,
                  "GraphContext::global_ids: expected ", n, " ids (dropout keys), got ",
                  graph.global_ids.size());
  if (training && c.batch_norm && c.total_layers > 1)
    TESSERA_CHECK(graph.global_num_nodes >= n, InvalidArgument,
                  "GraphContext::global_num_nodes must count the rows of all ranks (>= ", n,
                  "), got ", graph.global_num_nodes);
  TESSERA_CHECK(features.device() == device(), InvalidArgument, "Model::forward: features on ",
                to_string(features.device()), ", the model on ", to_string(device()));
  s.features = &features;
  s.backward_ready = false;
  s.epoch = epoch;
  s.has_forward = false;  // until this forward completes

  // Initial residual: layer 0's output, read by all layers; a slice after layer 0 reads its
  // caller's copy.
  const bool keeps_initial = c.kind->initial_residual && c.first_layer == 0;
  if (c.kind->initial_residual && c.first_layer > 0) {
    TESSERA_CHECK(s.initial != nullptr, InvalidArgument, "Model::forward: a slice of a ",
                  to_string(c.kind), " model from layer ", c.first_layer,
                  " reads layer 0's output: set_initial(", slot, ", h0) first");
    check_shape(*s.initial, n, c.hidden_channels, "Model::forward h0 (set_initial)");
  }
  const Tensor* h = &features;  // (N, F_in of layer l): the input of the next layer
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    h = forward_layer(s, i, h, graph, training, epoch);
    if (training && i > 0) keep_signs_only(s, i - 1);
    if (s.inference_only) {  // keep only this layer's output for the next one (and h0)
      if (i > 1 || (i == 1 && !keeps_initial)) s.layers[i - 1].release();
      s.layers[i].release(h);
    }
  }
  // (N, C), or (N, F_hidden) for a slice ending in a hidden layer
  logits.resize(n, h->cols(), h->device());
  logits.copy_from(*h);
  if (s.inference_only) {
    // A slice ending before the last layer keeps h0 for initial(): the next slice reads it.
    const bool keep_h0 = keeps_initial && c.first_layer + c.num_layers < c.total_layers;
    s.layers.back().release(keep_h0 && s.layers.size() == 1 ? &s.output(0, c.batch_norm) : nullptr);
    if (keeps_initial && !keep_h0) s.layers.front().release();
  }
  s.has_forward = true;
  s.backward_ready = training;
}

const Tensor* Model::forward_layer(State& s, std::size_t i, const Tensor* h, GraphContext& graph,
                                   bool training, std::int64_t epoch) {
  const ModelConfig& c = config_;
  State::Layer& layer = s.layers[i];
  const int l = layer.at.shape.layer;
  const std::int64_t n = h->rows();
  const bool bn = layer.hidden() && c.batch_norm;
  const Activation act = layer.hidden() && !bn ? c.kind->activation : Activation::None;
  const float rate = l == 0 ? c.input_dropout : c.dropout;
  layer.in = h;
  layer.dropout = training && rate > 0.0f;
  layer.stand_in = nullptr;
  layer.signs_only = false;
  if (layer.dropout) drop_input(s, i, graph);
  if (c.kind->initial_residual && l > 0)
    layer.conv->set_initial(c.first_layer == 0 ? &s.output(0, c.batch_norm) : s.initial,
                            &workspace_->d_initial);
  layer.conv->set_step(
      training, CounterRng(c.seed, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(l),
                           RngPurpose::AttentionDropout));
  layer.conv->forward(layer.conv_out, conv_input(s, i, graph), params(), act, propagator_of(graph));
  layer.stand_in = layer.conv->input_stand_in();
  if (layer.dropout && layer.stand_in != nullptr) layer.dropped = Tensor();  // read for its shape
  h = &layer.conv_out;
  if (bn) {
    const auto f = static_cast<std::size_t>(layer.f_out());
    const std::span<const float> p = params();
    std::span<float> buffers(buffers_);
    batch_norm1d_forward(layer.bn_out, layer.bn,
                         buffers.subspan(static_cast<std::size_t>(layer.at.running_mean_at), f),
                         buffers.subspan(static_cast<std::size_t>(layer.at.running_var_at), f),
                         layer.conv_out, p.subspan(static_cast<std::size_t>(layer.at.gamma_at), f),
                         p.subspan(static_cast<std::size_t>(layer.at.beta_at), f), training,
                         graph.global_num_nodes, graph.all_reduce);
    bias_act_forward(layer.bn_out, layer.bn_out, {}, c.kind->activation);
    h = &layer.bn_out;
  }
  if (layer.at.residual) {
    layer.res_out.resize(n, layer.f_out(), h->device());
    layer.res_out.zero();
    axpy(layer.res_out, kResidualBranch, *h);
    axpy(layer.res_out, kResidualSkip, *layer.in);
    h = &layer.res_out;
  }
  return h;
}

// The output of a layer that keeps_signs_only() names is replaced by its signs, a bit instead of
// a float, once the next layer's forward has read it (host tensors).
void Model::keep_signs_only(State& s, std::size_t j) {
  State::Layer& layer = s.layers[j];
  const State::Layer& next = s.layers[j + 1];
  if (!keeps_signs_only(config_, layer.at.shape.layer) ||
      layer.conv_out.device().kind != DeviceKind::Cpu)
    return;
  TESSERA_CHECK(next.stand_in != nullptr && next.in == &layer.conv_out, Internal, "Model: layer ",
                next.at.shape.layer,
                " reads its input in the backward, which keeps_signs_only said it would not");
  const std::int64_t n = layer.conv_out.rows(), bytes = (layer.f_out() + 7) / 8;
  if (layer.positive.dtype() != DType::U8 || layer.positive.rows() != n ||
      layer.positive.cols() != bytes)
    layer.positive = Tensor(n, bytes, DType::U8);
  positive_bits(layer.positive, layer.conv_out);
  layer.conv_out = Tensor();
  layer.signs_only = true;
}

void Model::drop_input(State& s, std::size_t i, const GraphContext& graph, const Tensor* busy_a,
                       const Tensor* busy_b) {
  State::Layer& layer = s.layers[i];
  const int l = layer.at.shape.layer;
  const float rate = l == 0 ? config_.input_dropout : config_.dropout;
  const Tensor& in = *layer.in;
  Workspace& ws = *workspace_;
  const bool shared = s.shares_dropped(i);
  if (shared && ws.dropped == nullptr) ws.dropped = &ws.take(busy_a, busy_b);
  Tensor& dropped = shared ? *ws.dropped : layer.dropped;
  dropped.resize_within(in.rows(), in.cols(), in.device());
  dropout_forward(dropped, in, rate, dropout_rng(config_.seed, s.epoch, l), graph.global_ids);
  if (shared) {
    ws.dropped_state = &s;
    ws.dropped_layer = i;
    ws.dropped_epoch = s.epoch;
  }
}

const Tensor& Model::conv_input(State& s, std::size_t i, const GraphContext& graph,
                                const Tensor* busy_a, const Tensor* busy_b) {
  const State::Layer& layer = s.layers[i];
  if (layer.stand_in != nullptr) return *layer.stand_in;
  if (!layer.dropout) return *layer.in;
  if (!s.shares_dropped(i)) return layer.dropped;
  const Workspace& ws = *workspace_;
  if (ws.dropped_state != &s || ws.dropped_layer != i || ws.dropped_epoch != s.epoch)
    drop_input(s, i, graph, busy_a, busy_b);
  return *ws.dropped;
}

void Model::backward(const Tensor& d_logits, GraphContext& graph, Tensor* d_input, int slot,
                     const Tensor* d_initial_later, Tensor* d_initial_out) {
  const ModelConfig& c = config_;
  TESSERA_CHECK(slot >= 0 && slot < c.slots, InvalidArgument, "Model::backward: slot ", slot,
                " of ", c.slots);
  State& s = *states_[static_cast<std::size_t>(slot)];
  TESSERA_CHECK(s.backward_ready, InvalidArgument,
                "Model::backward needs a training forward before it (one backward per forward)");
  propagator_of(graph);  // checked before any work
  check_shape(d_logits, s.features->rows(), s.layers.back().f_out(), "Model::backward d_logits");
  s.backward_ready = false;
  workspace_->dropped_pinned = false;  // in case a backward before this one threw
  // Initial residual: the layers after the first accumulate the gradient of its output.
  // (In a pipeline, the later stages' share arrives as d_initial_later.)
  const bool initial = c.kind->initial_residual;
  Tensor& d_initial = workspace_->d_initial;
  if (initial) {
    d_initial.resize(d_logits.rows(), c.hidden_channels, d_logits.device());
    d_initial.zero();
    if (d_initial_later != nullptr) {
      check_shape(*d_initial_later, d_logits.rows(), c.hidden_channels,
                  "Model::backward d_initial_later");
      axpy(d_initial, 1.0f, *d_initial_later);
    }
  }
  // Gradient w.r.t. layer i's output, read-only until copied.
  const Tensor* d_h = &d_logits;
  for (std::size_t i = s.layers.size(); i-- > 0 && d_h != nullptr;) {
    if (initial && i == 0 && c.first_layer == 0) {
      // Layer 0: its output's gradient gains d_initial (on a copy when it is the caller's).
      if (d_h == &d_logits) {
        Tensor& copy = workspace_->take(nullptr);
        copy.resize(d_logits.rows(), d_logits.cols(), d_logits.device());
        copy.copy_from(d_logits);
        d_h = &copy;
      }
      axpy(const_cast<Tensor&>(*d_h), 1.0f, d_initial);
    }
    d_h = backward_layer(s, i, d_h, d_logits, graph, d_input);
  }
  if (initial && c.first_layer > 0 && d_initial_out != nullptr) {
    d_initial_out->resize(d_initial.rows(), d_initial.cols(), d_initial.device());
    d_initial_out->copy_from(d_initial);
  }
}

void Model::release_gradients() {
  Workspace& ws = *workspace_;
  for (Tensor& t : ws.pool) t = Tensor();
  ws.forget_dropped();
}

void Model::set_initial(int slot, const Tensor* h0) {
  TESSERA_CHECK(slot >= 0 && slot < config_.slots, InvalidArgument, "Model::set_initial: slot ",
                slot, " of ", config_.slots);
  states_[static_cast<std::size_t>(slot)]->initial = h0;
}

const Tensor& Model::initial(int slot) const {
  const ModelConfig& c = config_;
  TESSERA_CHECK(c.kind->initial_residual && slot >= 0 && slot < c.slots, InvalidArgument,
                "Model::initial: slot ", slot, " of ", c.slots, " of a ", to_string(c.kind),
                " model");
  const State& s = *states_[static_cast<std::size_t>(slot)];
  if (c.first_layer > 0) {
    TESSERA_CHECK(s.initial != nullptr, InvalidArgument, "Model::initial: no h0 set for slot ",
                  slot);
    return *s.initial;
  }
  TESSERA_CHECK(s.has_forward, InvalidArgument, "Model::initial: slot ", slot,
                " has no forward");
  return s.output(0, c.batch_norm);
}

const Tensor* Model::backward_layer(State& s, std::size_t i, const Tensor* d_h,
                                    const Tensor& d_logits, GraphContext& graph, Tensor* d_input) {
  const ModelConfig& c = config_;
  State::Layer& layer = s.layers[i];
  const int l = layer.at.shape.layer;
  const std::int64_t n = s.features->rows();
  const bool bn = layer.hidden() && c.batch_norm;
  const Activation act = layer.hidden() && !bn ? c.kind->activation : Activation::None;
  const std::span<float> g = grads();
  const std::span<const float> p = params();
  Workspace& ws = *workspace_;
  const Tensor* d_skip = nullptr;  // residual: the gradient of the output, for the skip
  if (layer.at.residual) {
    // out = kResidualBranch * branch + kResidualSkip * in: the branch gets a scaled copy.
    d_skip = d_h;
    Tensor& d_branch = ws.take(d_h);
    d_branch.resize(n, layer.f_out(), d_h->device());
    d_branch.zero();
    axpy(d_branch, kResidualBranch, *d_h);
    d_h = &d_branch;
  }
  if (bn) {
    // Back through ReLU (in place, on a copy when the tensor is the caller's) and BN.
    Tensor* d = const_cast<Tensor*>(d_h);
    if (d_h == &d_logits) {
      d = &ws.take(d_skip);
      d->resize(n, layer.f_out(), d_logits.device());
      d->copy_from(d_logits);
    }
    const auto f = static_cast<std::size_t>(layer.f_out());
    std::span<float> d_gamma = g.subspan(static_cast<std::size_t>(layer.at.gamma_at), f);
    std::span<float> d_beta = g.subspan(static_cast<std::size_t>(layer.at.beta_at), f);
    std::span<const float> gamma = p.subspan(static_cast<std::size_t>(layer.at.gamma_at), f);
    bias_act_backward(*d, {}, *d, layer.bn_out, c.kind->activation);
    Tensor& d_bn_in = ws.take(d, d_skip);  // (N, F_hidden)
    batch_norm1d_backward(d_bn_in, d_gamma, d_beta, layer.bn, *d, gamma, graph.global_num_nodes,
                          graph.all_reduce);
    d_h = &d_bn_in;
  }
  // The conv, then back through the input's dropout and the skip: the gradient of the layer's
  // input, into d_input for the slice's first layer.
  // The conv's input first (drawn again into the pool when another layer's took its place),
  // kept from the gradients while the conv's backward reads it.
  const Tensor& x = conv_input(s, i, graph, d_h, d_skip);
  ws.dropped_pinned = &x == ws.dropped;
  Tensor* d_x = i > 0 ? &ws.take(d_h, d_skip) : d_input;
  // The conv's gradient before bias and activation goes into d_h's own memory when d_h is the
  // model's workspace (read by nothing after the conv; a residual's d_skip is another buffer),
  // else into the shared d_pre.
  Tensor d_h_memory;
  if (d_h != &d_logits) {
    Tensor& own = const_cast<Tensor&>(*d_h);
    d_h_memory = Tensor::borrow(own.raw(), own.rows(), own.cols(), own.dtype(), own.device());
  }
  // A layer kept as signs gives its ReLU's backward the signs in place of the output.
  layer.conv->backward(d_x, g, *d_h, x, layer.signs_only ? layer.positive : layer.conv_out, p, act,
                       propagator_of(graph), d_h_memory.empty() ? ws.d_pre : d_h_memory);
  ws.dropped_pinned = false;
  if (d_x == nullptr) return nullptr;
  if (layer.dropout)
    dropout_backward(*d_x, *d_x, l == 0 ? c.input_dropout : c.dropout,
                     dropout_rng(c.seed, s.epoch, l), graph.global_ids);
  if (d_skip != nullptr) axpy(*d_x, kResidualSkip, *d_skip);
  return d_x;
}

std::vector<bool> Model::relu_on(int layer) const {
  TESSERA_CHECK(layer >= 0 && layer < config_.num_layers, InvalidArgument,
                "relu_on: layer must be in [0, ", config_.num_layers, "), got ", layer);
  const State& s = *states_.front();
  const State::Layer& l = s.layers[static_cast<std::size_t>(layer)];
  TESSERA_CHECK(s.has_forward && l.hidden() && config_.kind->activation == Activation::Relu,
                InvalidArgument, "relu_on: layer ", layer,
                " has no ReLU in the last forward (a hidden layer of a ReLU kind after a forward)");
  std::vector<bool> on;
  if (l.signs_only) {
    const Tensor& bits = l.positive;
    for (std::int64_t r = 0; r < bits.rows(); ++r)
      for (std::int64_t k = 0; k < l.f_out(); ++k)
        on.push_back((bits.row<std::uint8_t>(r)[k / 8] >> (k % 8)) & 1u);
    return on;
  }
  // With batch norm the ReLU follows it (in place in bn_out); else it is the conv's (a residual
  // layer's branch, before the skip is added).
  const std::vector<float> values = host_f32(config_.batch_norm ? l.bn_out : l.conv_out);
  for (const float v : values) on.push_back(v > 0.0f);
  return on;
}

const Tensor& Model::embeddings(int layer) const {
  TESSERA_CHECK(layer >= 0 && layer < config_.num_layers, InvalidArgument,
                "embeddings: layer must be in [0, ", config_.num_layers, "), got ", layer);
  const State& s = *states_.front();
  TESSERA_CHECK(s.has_forward, InvalidArgument, "embeddings: no forward has run yet");
  TESSERA_CHECK(!s.layers[static_cast<std::size_t>(layer)].signs_only, InvalidArgument,
                "embeddings: the training forward kept only the signs of layer ", layer,
                "'s output; an evaluation forward keeps every layer's");
  return s.output(static_cast<std::size_t>(layer), config_.batch_norm);
}

}  // namespace tessera
