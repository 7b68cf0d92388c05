// Model: the layer stack of OGB's node-property examples over gcn/sage/batch_norm layers:
//   [input dropout] -> conv_0 -> [BN] -> ReLU -> dropout -> conv_1 -> ... -> conv_{L-1} -> logits,
// written as dropout on each conv's input (the features with the input rate, layer l-1's output
// with the dropout rate, mask key l), so that a layer's output is the clean embedding the next
// layer (or pipeline stage) reads. ResGcn hidden layers l >= 1 add a scaled branch to their
// clean input: h_{l+1} = h_l + 0.1 ReLU(conv(dropout(h_l))).
// Parameters: one flat buffer, per layer "convs.l.weight" (F_in, F_out), "convs.l.bias" (F_out),
// "convs.l.root_weight" (SAGE), then "bns.l.weight"/"bns.l.bias" (gamma/beta). Only conv
// weights (weight, root_weight) get decay=true: biases and BN affine parameters are not decayed.
// A slice holds the same entries for its layers only, in the same order.
#include "layers/model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/kernels.h"
#include "core/rng.h"
#include "layers/batch_norm.h"
#include "layers/gcn.h"
#include "layers/sage.h"

namespace tessera {

ModelKind parse_model_kind(const std::string& text) {
  if (text == "gcn") return ModelKind::Gcn;
  if (text == "sage") return ModelKind::Sage;
  if (text == "resgcn") return ModelKind::ResGcn;
  TESSERA_FAIL(InvalidArgument, "model kind: expected 'gcn', 'sage' or 'resgcn', got '", text,
               "'");
}

std::string to_string(ModelKind kind) {
  switch (kind) {
    case ModelKind::Gcn: return "gcn";
    case ModelKind::Sage: return "sage";
    case ModelKind::ResGcn: return "resgcn";
  }
  return "?";
}

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
  return config.kind == ModelKind::ResGcn && layer >= 1 && layer + 1 < total;
}

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
    Tensor res_out;  // (N, F_out) the above mixed with the layer's input (residual layers)
    Tensor dropped;  // (N, F_in) the conv's input after dropout (when `dropout`); freed after
                     // the forward when the backward needs only its shape (see conv_input)
    bool input_released = false;  // `dropped` was freed after the forward
    const Tensor* in = nullptr;  // the layer's input in the last forward (before dropout)
    bool dropout = false;   // the last forward dropped out the conv's input
    bool hidden = false;    // not the model's last layer: activation, dropout before the next
    bool residual = false;  // mixes its input into its output

    // Frees the activations and workspaces (inference-only slots).
    // Frees the activations and workspaces except `keep` (inference-only slots).
    void release(const Tensor* keep = nullptr) {
      for (Tensor* t : {&conv_out, &bn_out, &res_out, &dropped, &gcn.mixed, &gcn.d_pre,
                        &sage.mixed, &sage.d_pre, &bn.x_hat})
        if (t != keep) *t = Tensor();
    }
    // conv_out = conv(x), weights copied from the flat params first.
    void conv_forward(ModelKind kind, std::span<const float> params, const Tensor& x,
                      Activation act, Propagator& propagator, int l);
    // Accumulates this conv's parameter gradients into the flat grads; d_x as in gcn_backward.
    // `workspace` lends the conv its backward workspace for the call (one for all layers and
    // slots, as backward runs one layer at a time).
    void conv_backward(ModelKind kind, std::span<float> grads, Tensor* d_x, const Tensor& d_out,
                       const Tensor& x, Activation act, Propagator& propagator, int l,
                       Tensor& workspace);
  };
  std::vector<Layer> layers;         // the slice's layers, in order
  const Tensor* features = nullptr;  // input of the last forward; not owned
  bool has_forward = false;          // embeddings() valid
  bool backward_ready = false;       // last forward was a training one, not yet backpropagated
  bool inference_only = false;       // set_inference_slot: keeps no activations
  std::int64_t epoch = 0;            // of the last forward: keys the dropout masks

  // Layer i's embedding (after activation and residual, before dropout).
  const Tensor& output(std::size_t i, bool batch_norm) const {
    const Layer& layer = layers[i];
    if (layer.residual) return layer.res_out;
    return batch_norm && layer.hidden ? layer.bn_out : layer.conv_out;
  }
  // What layer i's conv read in the last forward: its input, after dropout when there was one.
  // A GCN that aggregates first reads its input in backward only for its shape, which its
  // aggregate P x shares: then the dropped-out input is freed after the forward and the
  // aggregate stands in for it. That saves one (N, F) tensor per such layer for the whole
  // backward (what lets a 32-layer arxiv-like pipeline stage fit 6 GB); allocating it again
  // every epoch costs ~5% of a 3-layer arxiv-like epoch on one rank (measured).
  const Tensor& conv_input(std::size_t i) const {
    const Layer& layer = layers[i];
    if (layer.input_released) return layer.gcn.mixed;
    return layer.dropout ? layer.dropped : *layer.in;
  }
};

// Backward workspaces, shared by all slots (one backward runs at a time): rotating activation
// gradients and the convs' gradient before bias + activation.
struct Model::Workspace {
  Tensor grads[3];  // (N, F_hidden)
  Tensor d_pre;     // (N, F_out)
  // A gradient buffer that is none of the given ones.
  Tensor& free_grad(const Tensor* a, const Tensor* b = nullptr) {
    for (Tensor& g : grads)
      if (&g != a && &g != b) return g;
    return grads[0];  // unreachable: three buffers, two taken at most
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

// dst (rows, cols) on `device` = src, parameter values on the same device.
void copy_into(Tensor& dst, std::span<const float> src, std::int64_t rows, std::int64_t cols,
               Device device) {
  dst.resize(rows, cols, device);
  backend(device).copy(dst.raw(), src.data(), src.size_bytes());
}

// dst = src, parameter gradients on src's device.
void copy_out(std::span<float> dst, const Tensor& src) {
  backend(src.device()).copy(dst.data(), src.raw(), src.bytes());
}

}  // namespace

void Model::State::Layer::conv_forward(ModelKind kind, std::span<const float> params,
                                       const Tensor& x, Activation act, Propagator& propagator,
                                       int l) {
  const auto w_size = static_cast<std::size_t>(f_in * f_out);
  copy_into(weight, params.subspan(static_cast<std::size_t>(weight_at), w_size), f_in, f_out,
            x.device());
  std::span<const float> bias =
      params.subspan(static_cast<std::size_t>(bias_at), static_cast<std::size_t>(f_out));
  if (kind != ModelKind::Sage) {  // GCN and residual GCN
    gcn_forward(conv_out, gcn, x, weight, bias, act, propagator, l);
    return;
  }
  copy_into(root_weight, params.subspan(static_cast<std::size_t>(root_weight_at), w_size), f_in,
            f_out, x.device());
  sage_forward(conv_out, sage, x, weight, bias, root_weight, act, propagator, l);
}

void Model::State::Layer::conv_backward(ModelKind kind, std::span<float> grads, Tensor* d_x,
                                        const Tensor& d_out, const Tensor& x, Activation act,
                                        Propagator& propagator, int l, Tensor& workspace) {
  Tensor& d_pre = kind == ModelKind::Sage ? sage.d_pre : gcn.d_pre;
  std::swap(d_pre, workspace);
  struct GiveBack {
    Tensor& a;
    Tensor& b;
    ~GiveBack() { std::swap(a, b); }
  } give_back{d_pre, workspace};
  const auto w_size = static_cast<std::size_t>(f_in * f_out);
  std::span<float> d_w = grads.subspan(static_cast<std::size_t>(weight_at), w_size);
  std::span<float> d_bias =
      grads.subspan(static_cast<std::size_t>(bias_at), static_cast<std::size_t>(f_out));
  copy_into(d_weight, d_w, f_in, f_out, x.device());  // gemm accumulates into a Tensor
  if (kind != ModelKind::Sage) {  // GCN and residual GCN
    gcn_backward(d_x, d_weight, d_bias, gcn, d_out, x, conv_out, weight, act, propagator, l);
  } else {
    std::span<float> d_root = grads.subspan(static_cast<std::size_t>(root_weight_at), w_size);
    copy_into(d_root_weight, d_root, f_in, f_out, x.device());
    sage_backward(d_x, d_weight, d_bias, d_root_weight, sage, d_out, x, conv_out, weight,
                  root_weight, act, propagator, l);
    copy_out(d_root, d_root_weight);
  }
  copy_out(d_w, d_weight);
}

Model::Model(const ModelConfig& config)
    : config_(config), workspace_(std::make_unique<Workspace>()) {
  ModelConfig& c = config_;
  TESSERA_CHECK(c.num_layers >= 1, InvalidArgument, "num_layers must be >= 1, got ",
                c.num_layers);
  if (c.total_layers == 0) c.total_layers = c.first_layer + c.num_layers;
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

  std::int64_t num_params = 0;
  auto add_param = [&](const std::string& name, std::int64_t rows, std::int64_t cols,
                       bool decay) {
    const std::int64_t offset = num_params;
    param_info_.push_back({name, offset, rows, cols, decay});
    num_params += rows * cols;
    return offset;
  };
  auto add_buffer = [&](const std::string& name, std::int64_t cols, float value) {
    const auto offset = static_cast<std::int64_t>(buffers_.size());
    buffer_info_.push_back({name, offset, 1, cols, false});
    buffers_.resize(buffers_.size() + static_cast<std::size_t>(cols), value);
    return offset;
  };

  std::vector<State::Layer> layers(static_cast<std::size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    State::Layer& layer = layers[static_cast<std::size_t>(i)];
    const int l = c.first_layer + i;
    layer.hidden = l + 1 < c.total_layers;
    layer.residual = is_residual_layer(c, l);
    layer.f_in = l == 0 ? c.in_channels : c.hidden_channels;
    layer.f_out = layer.hidden ? c.hidden_channels : c.out_channels;
    const std::string prefix = "convs." + std::to_string(l) + ".";
    layer.weight_at = add_param(prefix + "weight", layer.f_in, layer.f_out, true);
    layer.bias_at = add_param(prefix + "bias", 1, layer.f_out, false);
    if (c.kind == ModelKind::Sage)
      layer.root_weight_at = add_param(prefix + "root_weight", layer.f_in, layer.f_out, true);
  }
  for (int i = 0; i < c.num_layers && c.batch_norm; ++i) {
    State::Layer& layer = layers[static_cast<std::size_t>(i)];
    if (!layer.hidden) continue;
    const std::string prefix = "bns." + std::to_string(c.first_layer + i) + ".";
    layer.gamma_at = add_param(prefix + "weight", 1, layer.f_out, false);
    layer.beta_at = add_param(prefix + "bias", 1, layer.f_out, false);
    layer.running_mean_at = add_buffer(prefix + "running_mean", layer.f_out, 0.0f);
    layer.running_var_at = add_buffer(prefix + "running_var", layer.f_out, 1.0f);
  }
  params_ = Tensor::zeros(1, num_params);
  grads_ = Tensor::zeros(1, num_params);

  // Glorot-uniform weights, zero biases, gamma 1, beta 0; deterministic from the seed and the
  // layer's index in the whole model.
  std::span<float> p = params();
  for (int i = 0; i < c.num_layers; ++i) {
    const State::Layer& layer = layers[static_cast<std::size_t>(i)];
    const CounterRng rng(c.seed, 0, static_cast<std::uint64_t>(c.first_layer + i),
                         RngPurpose::Init);
    const auto size = static_cast<std::size_t>(layer.f_in * layer.f_out);
    glorot_uniform(p.subspan(static_cast<std::size_t>(layer.weight_at), size), layer.f_in,
                   layer.f_out, rng, 0);
    if (layer.root_weight_at >= 0)
      glorot_uniform(p.subspan(static_cast<std::size_t>(layer.root_weight_at), size),
                     layer.f_in, layer.f_out, rng, 1);
    if (layer.gamma_at >= 0)
      std::fill_n(p.begin() + layer.gamma_at, layer.f_out, 1.0f);
  }
  // Every slot gets the same layout (offsets, widths, flags) and its own activations.
  for (int slot = 0; slot < c.slots; ++slot) {
    states_.push_back(std::make_unique<State>());
    std::vector<State::Layer>& own = states_.back()->layers;
    own.resize(layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const State::Layer& from = layers[i];
      State::Layer& to = own[i];
      to.f_in = from.f_in, to.f_out = from.f_out;
      to.weight_at = from.weight_at, to.bias_at = from.bias_at;
      to.root_weight_at = from.root_weight_at;
      to.gamma_at = from.gamma_at, to.beta_at = from.beta_at;
      to.running_mean_at = from.running_mean_at, to.running_var_at = from.running_var_at;
      to.hidden = from.hidden, to.residual = from.residual;
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

void Model::forward(Tensor& logits, const Tensor& features, GraphContext& graph, bool training,
                    std::int64_t epoch, int slot) {
  const ModelConfig& c = config_;
  TESSERA_CHECK(slot >= 0 && slot < c.slots, InvalidArgument, "Model::forward: slot ", slot,
                " of ", c.slots);
  State& s = *states_[static_cast<std::size_t>(slot)];
  TESSERA_CHECK(!training || !s.inference_only, InvalidArgument, "Model::forward: slot ", slot,
                " is inference only");
  Propagator* propagator = c.kind == ModelKind::Sage ? graph.mean : graph.gcn;
  TESSERA_CHECK(propagator != nullptr, InvalidArgument, "GraphContext has no ",
                c.kind == ModelKind::Sage ? "mean" : "gcn", " propagator for a ",
                to_string(c.kind), " model");
  const std::int64_t n = features.rows();
  check_shape(features, propagator->num_rows(), s.layers.front().f_in, "Model::forward features");
  // Dropout on each conv's input: the features (input dropout, key 0) or layer l-1's output
  // (key l): the same masks as dropout after each hidden layer.
  auto dropout_rate = [&](int l) { return l == 0 ? c.input_dropout : c.dropout; };
  bool any_dropout = false;
  for (std::size_t i = 0; i < s.layers.size(); ++i)
    any_dropout |= training && dropout_rate(c.first_layer + static_cast<int>(i)) > 0.0f;
  if (any_dropout)
    TESSERA_CHECK(static_cast<std::int64_t>(graph.global_ids.size()) == n, InvalidArgument,
                  "GraphContext::global_ids: expected ", n, " ids (dropout keys), got ",
                  graph.global_ids.size());
  if (training && c.batch_norm && c.total_layers > 1)
    TESSERA_CHECK(graph.global_num_nodes >= n, InvalidArgument,
                  "GraphContext::global_num_nodes must count the rows of all ranks (>= ", n,
                  "), got ", graph.global_num_nodes);
  s.features = &features;
  s.backward_ready = false;
  s.epoch = epoch;
  s.has_forward = false;  // until this forward completes

  TESSERA_CHECK(features.device() == device(), InvalidArgument, "Model::forward: features on ",
                to_string(features.device()), ", the model on ", to_string(device()));
  std::span<const float> p = params();
  const Tensor* h = &features;  // (N, F_in of layer l): the input of the next layer
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    State::Layer& layer = s.layers[i];
    const int l = c.first_layer + static_cast<int>(i);
    const bool bn = layer.hidden && c.batch_norm;
    const Activation act = layer.hidden && !bn ? Activation::Relu : Activation::None;
    layer.in = h;
    layer.dropout = training && dropout_rate(l) > 0.0f;
    if (layer.dropout) {
      layer.dropped.resize(n, layer.f_in, h->device());
      dropout_forward(layer.dropped, *h, dropout_rate(l), dropout_rng(c.seed, epoch, l),
                      graph.global_ids);
    }
    layer.input_released = false;
    layer.conv_forward(c.kind, p, s.conv_input(i), act, *propagator, l);
    if (training && layer.dropout && c.kind != ModelKind::Sage && !layer.gcn.transform_first) {
      layer.dropped = Tensor();  // (see conv_input)
      layer.input_released = true;
    }
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
    if (layer.residual) {
      layer.res_out.resize(n, layer.f_out, h->device());
      layer.res_out.zero();
      axpy(layer.res_out, kResidualBranch, *h);
      axpy(layer.res_out, kResidualSkip, *layer.in);
      h = &layer.res_out;
    }
    if (s.inference_only) {  // keep only this layer's output for the next one
      if (i > 0) s.layers[i - 1].release();
      layer.release(h);
    }
  }
  // (N, C), or (N, F_hidden) for a slice ending in a hidden layer
  logits.resize(n, h->cols(), h->device());
  logits.copy_from(*h);
  if (s.inference_only) s.layers.back().release();
  s.has_forward = true;
  s.backward_ready = training;
}

void Model::backward(const Tensor& d_logits, GraphContext& graph, Tensor* d_input, int slot) {
  const ModelConfig& c = config_;
  TESSERA_CHECK(slot >= 0 && slot < c.slots, InvalidArgument, "Model::backward: slot ", slot,
                " of ", c.slots);
  State& s = *states_[static_cast<std::size_t>(slot)];
  TESSERA_CHECK(s.backward_ready, InvalidArgument,
                "Model::backward needs a training forward before it (one backward per forward)");
  Propagator* propagator = c.kind == ModelKind::Sage ? graph.mean : graph.gcn;
  TESSERA_CHECK(propagator != nullptr, InvalidArgument, "GraphContext has no propagator for a ",
                to_string(c.kind), " model");
  const std::int64_t n = s.features->rows();
  check_shape(d_logits, n, s.layers.back().f_out, "Model::backward d_logits");
  s.backward_ready = false;

  std::span<float> g = grads();
  std::span<const float> p = params();
  Workspace& ws = *workspace_;
  // Gradient w.r.t. layer i's output, read-only until copied.
  const Tensor* d_h = &d_logits;
  for (int i = static_cast<int>(s.layers.size()) - 1; i >= 0; --i) {
    State::Layer& layer = s.layers[static_cast<std::size_t>(i)];
    const int l = c.first_layer + i;
    const bool bn = layer.hidden && c.batch_norm;
    const Activation act = layer.hidden && !bn ? Activation::Relu : Activation::None;
    const Tensor* d_skip = nullptr;  // residual: the gradient of the output, for the skip
    if (layer.residual) {
      // out = kResidualBranch * branch + kResidualSkip * in: the branch gets a scaled copy.
      d_skip = d_h;
      Tensor& d_branch = ws.free_grad(d_h);
      d_branch.resize(n, layer.f_out, d_h->device());
      d_branch.zero();
      axpy(d_branch, kResidualBranch, *d_h);
      d_h = &d_branch;
    }
    if (bn) {
      // Back through ReLU (in place, on a copy when the tensor is the caller's) and BN.
      Tensor* d = const_cast<Tensor*>(d_h);
      if (d_h == &d_logits) {
        d = &ws.free_grad(d_skip);
        d->resize(n, layer.f_out, d_logits.device());
        d->copy_from(d_logits);
      }
      const auto f = static_cast<std::size_t>(layer.f_out);
      std::span<float> d_gamma = g.subspan(static_cast<std::size_t>(layer.gamma_at), f);
      std::span<float> d_beta = g.subspan(static_cast<std::size_t>(layer.beta_at), f);
      std::span<const float> gamma = p.subspan(static_cast<std::size_t>(layer.gamma_at), f);
      bias_act_backward(*d, {}, *d, layer.bn_out, Activation::Relu);
      Tensor& d_bn_in = ws.free_grad(d, d_skip);  // (N, F_hidden)
      batch_norm1d_backward(d_bn_in, d_gamma, d_beta, layer.bn, *d, gamma, graph.global_num_nodes,
                            graph.all_reduce);
      d_h = &d_bn_in;
    }
    // The conv, then back through the input's dropout and the skip: the gradient of the layer's
    // input, into d_input for the slice's first layer.
    Tensor* d_x = nullptr;
    if (i > 0) {
      d_x = &ws.free_grad(d_h, d_skip);
    } else if (d_input != nullptr) {
      d_x = d_input;
    }
    layer.conv_backward(c.kind, g, d_x, *d_h, s.conv_input(static_cast<std::size_t>(i)), act,
                        *propagator, l, ws.d_pre);
    if (d_x == nullptr) break;
    if (layer.dropout)
      dropout_backward(*d_x, *d_x, l == 0 ? c.input_dropout : c.dropout,
                       dropout_rng(c.seed, s.epoch, l), graph.global_ids);
    if (d_skip != nullptr) axpy(*d_x, kResidualSkip, *d_skip);
    d_h = d_x;
  }
}

const Tensor& Model::embeddings(int layer) const {
  TESSERA_CHECK(layer >= 0 && layer < config_.num_layers, InvalidArgument,
                "embeddings: layer must be in [0, ", config_.num_layers, "), got ", layer);
  const State& s = *states_.front();
  TESSERA_CHECK(s.has_forward, InvalidArgument, "embeddings: no forward has run yet");
  return s.output(static_cast<std::size_t>(layer), config_.batch_norm);
}

}  // namespace tessera
