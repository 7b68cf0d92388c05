// SPDX-License-Identifier: Apache-2.0
// Model: a stack of layers of one registered kind (layers/layer_kind.h: GCN, GraphSAGE, residual
// GCN, ...) with (batch norm,) ReLU and dropout between them, as in OGB's node-property examples.
// Parameters and their gradients each live in one contiguous buffer (one all-reduce, one checkpoint
// write); layers index into it. forward() keeps the activations backward() needs; backward()
// overwrites activation gradients and *accumulates* parameter gradients (call zero_grad() each
// step). A Model may also be a slice of consecutive layers of a deeper one (a pipeline stage), and
// may keep several forwards in flight at once (slots: one per chunk of a pipeline).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "layers/layer_kind.h"
#include "layers/propagator.h"

namespace tessera {

struct ModelConfig {
  ModelKind kind = ModelKind::Gcn;  // the layer kind (layers/layer_kinds.cc)
  std::int64_t in_channels = 0;
  std::int64_t hidden_channels = 16;
  std::int64_t out_channels = 0;
  int num_layers = 2;
  float dropout = 0.5f;        // after every hidden layer
  float input_dropout = 0.0f;  // on the input features (Kipf & Welling use the same p as dropout)
  bool batch_norm = false;     // BatchNorm1d over nodes after every hidden layer
  LayerHyper hyper;            // the kind's hyperparameters (GCNII's alpha and lambda)
  std::uint64_t seed = 0;      // parameter initialisation (Glorot uniform) and dropout masks
  // A slice: layers [first_layer, first_layer + num_layers) of a model of total_layers layers
  // (0: num_layers, the whole model). in_channels and out_channels stay those of the whole
  // model; initialisation, dropout keys and parameter names are those of the whole model's
  // layers, so the slices of a model together hold exactly its parameters.
  int first_layer = 0;
  int total_layers = 0;
  int slots = 1;               // forwards that may be in flight at once (see Model::forward)
};

// Whether layer `layer` of a model adds its input to its output (hidden layers >= 1 of a
// residual kind).
bool is_residual_layer(const ModelConfig& config, int layer);

// Whether a host training step keeps hidden layer `layer`'s output as its signs only, once the
// next layer's forward has read it: a ReLU layer without batch norm, residual or initial
// residual whose next layer's backward reads its input for the shape alone (a GCN that
// aggregates first keeps P x). Model::forward applies it; the planner counts what a GPU, which
// keeps the outputs whole, holds beyond it.
bool keeps_signs_only(const ModelConfig& config, int layer);

// Sums a buffer of doubles over all ranks in place (identity on one process). Batch norm uses
// it so that statistics are those of the whole graph, whatever the partitioning.
using AllReduceSum = std::function<void(std::span<double>)>;

// What a model needs to know about the graph it runs on (one rank's part of it).
class GraphContext {
 public:
  // The propagator that applies `op` on this rank (a model aggregates with its kind's operator);
  // set it to null to take it away.
  void set_propagator(const GraphOperator& op, Propagator* propagator);
  Propagator* propagator(const GraphOperator& op) const;  // null when none is set

  std::span<const GlobalId> global_ids;  // (N) global id of every owned row: dropout keys
  std::int64_t global_num_nodes = 0;     // rows over all ranks (batch-norm statistics)
  AllReduceSum all_reduce;               // may be empty on one process

 private:
  std::vector<std::pair<const GraphOperator*, Propagator*>> propagators_;
};

// Where one parameter tensor sits in the flat buffer.
struct ParamInfo {
  std::string name;  // e.g. "convs.0.weight", "convs.0.root_weight", "bns.0.weight" (gamma)
  std::int64_t offset = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool decay = true;  // weight decay applies (weights), or not (biases, batch-norm affine)
  bool dense = false;  // a dense layer's weight (ParamDecl::dense): the optimizer's dense rate
};

class Model {
 public:
  explicit Model(const ModelConfig& config);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const ModelConfig& config() const { return config_; }
  // The flat parameters and their gradients, where the model lives (device()): on a GPU these
  // spans point to GPU memory, which the kernels, the optimizer and NCCL take as they are; use
  // host_params()/set_params() to read or write them from the host.
  std::span<float> params() { return params_.f32_span(); }
  std::span<const float> params() const { return params_.f32_span(); }
  std::span<float> grads() { return grads_.f32_span(); }
  std::vector<float> host_params() const;
  void set_params(std::span<const float> host_values);  // (num_params) values
  const std::vector<ParamInfo>& param_info() const { return param_info_; }
  void zero_grad();
  // Moves the parameters and gradients to `device` (a model is built on the host); forward()
  // then takes its input there. Batch-norm running statistics stay on the host.
  void to(Device device);
  Device device() const { return params_.device(); }

  // logits (N, out_channels). training: dropout on and batch-norm batch statistics (and running
  // statistics updated); otherwise no dropout and running statistics. epoch keys dropout masks.
  // `features` is referenced, not copied: keep it alive and unchanged until backward().
  // A slice reads its first layer's input (the features, or the previous slice's output) and
  // writes its last layer's output: the logits, or (hidden) the embedding the next layer reads
  // (dropout is applied by the layer that reads it). `slot` in [0, slots) keeps this forward's activations apart from the
  // other slots' until its backward.
  void forward(Tensor& logits, const Tensor& features, GraphContext& graph, bool training,
               std::int64_t epoch, int slot = 0);
  // Accumulates parameter gradients from d_logits (N, F_out of the last layer) of the last
  // forward of `slot` (which must have been a training forward; one backward per forward).
  // d_input (N, F_in of the first layer), when given, is overwritten with the gradient of the
  // input (a pipeline stage's upstream gradient); otherwise none is computed for it.
  // Initial-residual kinds (GCNII) cut into slices: d_initial_later (N, F_hidden), when given,
  // is the gradient of layer 0's output that later slices accumulated (added to this slice's);
  // a slice after layer 0 OVERWRITES d_initial_out, when given, with the sum, for the slice
  // before it.
  void backward(const Tensor& d_logits, GraphContext& graph, Tensor* d_input = nullptr,
                int slot = 0, const Tensor* d_initial_later = nullptr,
                Tensor* d_initial_out = nullptr);

  // Initial-residual kinds: every layer reads layer 0's output h0. A slice after layer 0 reads
  // its caller's (N, F_hidden) h0, set before each forward of `slot` and kept alive and unchanged
  // until that slot's backward. initial(slot): the h0 the last forward of `slot` read or made
  // (a slice with layer 0: its output, kept in inference slots unless the slice ends the model).
  void set_initial(int slot, const Tensor* h0);
  const Tensor& initial(int slot) const;

  // Marks `slot` as inference only: its forwards keep no activations (each layer's are freed
  // once the next layer has read them), so a whole-graph evaluation slot costs two layers of
  // memory instead of all of them. Such a slot cannot run a training forward.
  void set_inference_slot(int slot);

  // Hands the backward's pool of (N, F) gradient buffers (and the dropped-out input among them)
  // back to the allocator, whose cache gives their blocks to the next tensors of their size: the
  // evaluation's layer outputs and the next forward's. A layer output that a training forward
  // reduced to its signs then costs no block from one backward to the next. Graph mode calls it
  // after every step; a pipeline, whose chunks differ in rows, keeps the pool.
  void release_gradients();

  // Output of layer `layer` (after its activation and residual) from the last forward of
  // slot 0: node embeddings for users of the library. layer in [0, num_layers). An evaluation
  // forward keeps every layer's; a training forward may keep only the signs of a hidden GCN
  // layer's (then this throws InvalidArgument).
  const Tensor& embeddings(int layer) const;
  // Which values of hidden layer `layer`'s ReLU were on (> 0) in the last forward of slot 0, row
  // by row: what its backward passes (tests of the gradient, which must not cross a kink).
  std::vector<bool> relu_on(int layer) const;

  // Batch-norm running statistics (not trained; part of a checkpoint). Empty without BN.
  std::span<float> buffers() { return buffers_; }
  std::span<const float> buffers() const { return buffers_; }
  // Where each buffer sits in buffers(): "bns.0.running_mean", "bns.0.running_var", ...
  const std::vector<ParamInfo>& buffer_info() const { return buffer_info_; }

 private:
  struct State;
  struct LayerLayout;
  // Declares every layer's parameters (the kind's, then batch norm's) and buffers, initialised.
  std::vector<LayerLayout> lay_out();
  Propagator& propagator_of(GraphContext& graph) const;
  // One layer of forward(): h (its input) to the layer's output (returned).
  const Tensor* forward_layer(State& s, std::size_t i, const Tensor* h, GraphContext& graph,
                              bool training, std::int64_t epoch);
  // One layer of backward(): the gradient of its output to that of its input (returned; null
  // for the slice's first layer without d_input).
  const Tensor* backward_layer(State& s, std::size_t i, const Tensor* d_h, const Tensor& d_logits,
                               GraphContext& graph, Tensor* d_input);
  // After layer j + 1's training forward: layer j's output replaced by its signs when nothing
  // but ReLU's backward reads it again.
  void keep_signs_only(State& s, std::size_t j);
  // Layer i's input after dropout from the layer's input and its mask of the state's epoch:
  // into the layer's own tensor or the shared workspace (State::shares_dropped), a pool buffer
  // other than busy_a and busy_b (the gradients a backward holds).
  void drop_input(State& s, std::size_t i, const GraphContext& graph,
                  const Tensor* busy_a = nullptr, const Tensor* busy_b = nullptr);
  // What layer i's conv read in its last forward: its input, after dropout when there was one
  // (drawn again when the shared workspace holds another layer's), or the conv's stand-in.
  const Tensor& conv_input(State& s, std::size_t i, const GraphContext& graph,
                           const Tensor* busy_a = nullptr, const Tensor* busy_b = nullptr);
  ModelConfig config_;
  Tensor params_;  // (1, num_params)
  Tensor grads_;   // (1, num_params)
  std::vector<float> buffers_;
  std::vector<ParamInfo> param_info_;
  std::vector<ParamInfo> buffer_info_;
  std::vector<std::unique_ptr<State>> states_;  // (slots)
  struct Workspace;
  std::unique_ptr<Workspace> workspace_;
};

}  // namespace tessera
