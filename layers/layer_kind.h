// SPDX-License-Identifier: Apache-2.0
// Layer kinds: what a kind of graph layer (GCN, SAGE, residual GCN, ...) is to the model that
// stacks it — its parameters, its forward/backward pair, the graph operator it aggregates with
// and the few facts the engine's cost and memory models need — behind one interface, and the
// table of kinds (layers/layer_kinds.cc). Model (layers/model.h) does what every kind shares:
// dropout on a layer's input, batch norm and ReLU after it, the residual mix, the flat
// parameter buffer and the slots.
// Adding a kind is one file (say layers/gat.cc) that defines `extern const LayerKind kGatLayer`
// with its Conv, and one line in the table of layers/layer_kinds.cc; docs/ARCHITECTURE.md has
// the recipe.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/kernels.h"
#include "core/tensor.h"
#include "layers/propagator.h"

namespace tessera {

// The hyperparameters some kinds take (the same for every layer of a model).
struct LayerHyper {
  float gcnii_alpha = 0.1f;   // GCNII: weight of the initial residual h0, in [0, 1)
  float gcnii_lambda = 0.5f;  // GCNII: identity mapping beta_l = log(lambda / l + 1), > 0
  int gat_heads = 8;          // GAT: attention heads of the hidden layers (concatenated)
  int gat_output_heads = 1;   // GAT: heads of the output layer (averaged)
  float attention_dropout = 0.0f;  // GAT: dropout on the attention weights, in [0, 1)
};

// One layer of a model: where it sits and its widths.
struct LayerShape {
  int layer = 0;       // index in the whole model (keys dropout, initialisation, messages)
  int num_layers = 1;  // of the whole model
  std::int64_t f_in = 0;
  std::int64_t f_out = 0;
  LayerHyper hyper;
  bool hidden() const { return layer + 1 < num_layers; }
  bool first() const { return layer == 0; }
};

// What a layer's halo exchange carries per halo row, forward and backward (0: no exchange): the
// traffic model of graph mode (engine/traffic_model.h).
struct HaloWidths {
  std::int64_t forward = 0;
  std::int64_t backward = 0;
};

// A parameter tensor a kind declares for one layer; the model places it in its flat buffer as
// "convs.<layer>.<name>" and initialises it.
enum class ParamInit { Zeros, Glorot };
struct ParamDecl {
  std::string name;  // "weight", "bias", "root_weight"
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool decay = true;  // weight decay applies (weights), or not (biases)
  ParamInit init = ParamInit::Zeros;
  // Glorot uniform over (rows, cols) drawn from the layer's Init stream; `stream` separates the
  // tensors of one layer (0 weight, 1 root weight).
  std::uint64_t stream = 0;
  // A dense (linear) layer's weight, such as GCNII's first and last layers: decayed at the
  // optimizer's dense rate (--dense-weight-decay) instead of the convolutions' rate.
  bool dense = false;
};

// One layer of one kind in one slot of a model: its forward cache and workspaces. `params` and
// `grads` are the model's flat buffers (on the model's device); the conv knows the offsets of its
// own tensors (in the order its kind declared them).
// Backward OVERWRITES the activation gradient d_x and ACCUMULATES the parameter gradients.
class Conv {
 public:
  virtual ~Conv() = default;
  // out (N, F_out) = act(the layer applied to x (N, F_in)); out is resized.
  virtual void forward(Tensor& out, const Tensor& x, std::span<const float> params, Activation act,
                       Propagator& propagator) = 0;
  // d_out (N, F_out): gradient w.r.t. the activated `out` of the last forward (one backward per
  // forward); x and out as in that forward, except that the model may give a ReLU layer the
  // signs of its output (u8 bits, positive_bits) for `out`, which bias_act_grad passes on. d_x (N,
  // F_in): overwritten, or null to skip it (the model's first layer). `workspace` is lent for the
  // call (one for every layer and slot) to hold d_pre, the gradient before bias and activation
  // (bias_act_grad); it may be a view of d_out's own memory, so a conv reads d_out only to make
  // d_pre from it.
  virtual void backward(Tensor* d_x, std::span<float> grads, const Tensor& d_out, const Tensor& x,
                        const Tensor& out, std::span<const float> params, Activation act,
                        Propagator& propagator, Tensor& workspace) = 0;
  // When the backward reads x for its shape only: a tensor of x's shape that outlives the
  // forward, so that the model may free a dropped-out input right after it; else null.
  virtual const Tensor* input_stand_in() const { return nullptr; }
  // Frees the cache and workspaces (inference-only slots).
  virtual void release() = 0;
  // Kinds with an initial residual (LayerKind::initial_residual), in their layers after the
  // first: h0 (N, F) is the output of the model's first layer, which the next forward reads;
  // the backward of that forward ACCUMULATES the gradient of h0 into d_h0. Both outlive the
  // forward and its backward. Other layers ignore it.
  virtual void set_initial(const Tensor* /*h0*/, Tensor* /*d_h0*/) {}
  // Before every forward: whether it trains, and the key of the layer's own random masks (GAT's
  // attention dropout); kinds without such masks ignore it.
  virtual void set_step(bool /*training*/, const CounterRng& /*rng*/) {}
};

// The normalised operator a kind aggregates with, built by the engine for each rank's part.
struct GraphOperator {
  std::string_view name;
  // Of the owned block on a symmetric graph: a symmetric operator's backward reuses it.
  MatrixSymmetry symmetry;
  // The (N, N + H) operator from a part's adjacency (N, N + H; symmetrised, no self loops) and
  // the global degree (with self loop) of each of its N + H columns. The adjacency is taken by
  // value: moved in, its arrays become the operator's (no second copy of the part's graph).
  Csr (*build)(Csr adjacency, std::span<const float> degrees);
};
extern const GraphOperator kGcnOperator;   // D^-1/2 (A + I) D^-1/2, global degrees
extern const GraphOperator kMeanOperator;  // the mean over in-neighbours (0 for none)
extern const GraphOperator kSumOperator;   // the sum over in-neighbours (no layer kind uses it)
// A + I with unit weights: the edges an attention layer weights itself (through HaloAccess).
extern const GraphOperator kAttentionOperator;

struct LayerKind {
  std::string_view name;  // what --model takes
  std::string_view help;
  const GraphOperator* op;
  // Hidden layers l >= 1 add a scaled branch to an identity shortcut: h_{l+1} = h_l + 0.1 ·
  // ReLU(layer(dropout(h_l))) (Model::forward).
  bool residual = false;
  // Every layer after the first reads the first layer's output h0 (GCNII's initial residual:
  // Conv::set_initial); a model slice must then start at layer 0, and the pipelined modes, whose
  // stages after the first do not have h0, refuse the kind.
  bool initial_residual = false;
  // The layer weights the edges itself (GAT): it runs on the propagator's HaloAccess, which the
  // pipelined modes do not offer, so they refuse the kind.
  bool attention = false;
  Activation activation = Activation::Relu;  // between layers (without batch norm)
  int gemms = 1;  // (N, F_in) x (F_in, F_out) products per layer: the pipeline's cost model
  // Whether the backward needs the (dropped-out) input itself: the pipeline's memory model.
  bool (*backward_reads_input)(std::int64_t f_in, std::int64_t f_out);
  HaloWidths (*halo_widths)(const LayerShape& shape);  // graph mode's traffic model
  std::vector<ParamDecl> (*params)(const LayerShape& shape);
  // A slot's layer, given the offsets of the declared parameters in the flat buffer.
  std::unique_ptr<Conv> (*make)(const LayerShape& shape, std::span<const std::int64_t> offsets);
};

// The kinds of layers/layer_kinds.cc, in table order, and their names.
std::span<const LayerKind* const> layer_kinds();
std::vector<std::string> layer_kind_names();
// The kind named `name`; InvalidArgument listing the names otherwise.
const LayerKind& find_layer_kind(std::string_view name);

// Which registered kind a model is made of: a handle that copies, compares and prints like an
// enum. The kinds built in have names here; any other registered kind is
// ModelKind(find_layer_kind(name)) (or parse_model_kind).
class ModelKind {
 public:
  constexpr explicit ModelKind(const LayerKind& kind) : kind_(&kind) {}
  const LayerKind& operator*() const { return *kind_; }
  const LayerKind* operator->() const { return kind_; }
  friend bool operator==(ModelKind a, ModelKind b) { return a.kind_ == b.kind_; }
  static const ModelKind Gcn, Sage, ResGcn, Gcnii, Gat;  // layers/gcn.cc, ..., gcnii.cc, gat.cc

 private:
  const LayerKind* kind_;
};
ModelKind parse_model_kind(const std::string& text);  // InvalidArgument listing the names
std::string to_string(ModelKind kind);
std::ostream& operator<<(std::ostream& out, ModelKind kind);

}  // namespace tessera
