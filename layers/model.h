// Model: a stack of GCN or GraphSAGE layers with (batch norm,) ReLU and dropout between them,
// as in OGB's node-property examples. Parameters and their gradients each live in one
// contiguous buffer (one all-reduce, one checkpoint write); layers index into it.
// forward() keeps the activations backward() needs; backward() overwrites activation
// gradients and *accumulates* parameter gradients (call zero_grad() each step).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "layers/propagator.h"

namespace tessera {

enum class ModelKind { Gcn, Sage };
ModelKind parse_model_kind(const std::string& text);  // "gcn" | "sage"; InvalidArgument else
std::string to_string(ModelKind kind);

struct ModelConfig {
  ModelKind kind = ModelKind::Gcn;
  std::int64_t in_channels = 0;
  std::int64_t hidden_channels = 16;
  std::int64_t out_channels = 0;
  int num_layers = 2;
  float dropout = 0.5f;        // after every hidden layer
  float input_dropout = 0.0f;  // on the input features (Kipf & Welling use the same p as dropout)
  bool batch_norm = false;     // BatchNorm1d over nodes after every hidden layer
  std::uint64_t seed = 0;      // parameter initialisation (Glorot uniform) and dropout masks
};

// Sums a buffer of doubles over all ranks in place (identity on one process). Batch norm uses
// it so that statistics are those of the whole graph, whatever the partitioning.
using AllReduceSum = std::function<void(std::span<double>)>;

// What a model needs to know about the graph it runs on (one rank's part of it).
struct GraphContext {
  Propagator* gcn = nullptr;    // D^-1/2 (A + I) D^-1/2 with global degrees (ModelKind::Gcn)
  Propagator* mean = nullptr;   // mean over in-neighbours (ModelKind::Sage)
  std::span<const GlobalId> global_ids;  // (N) global id of every owned row: dropout keys
  std::int64_t global_num_nodes = 0;     // rows over all ranks (batch-norm statistics)
  AllReduceSum all_reduce;               // may be empty on one process
};

// Where one parameter tensor sits in the flat buffer.
struct ParamInfo {
  std::string name;  // e.g. "convs.0.weight", "convs.0.root_weight", "bns.0.weight" (gamma)
  std::int64_t offset = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool decay = true;  // weight decay applies (weights), or not (biases, batch-norm affine)
};

class Model {
 public:
  explicit Model(const ModelConfig& config);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const ModelConfig& config() const { return config_; }
  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::span<float> grads() { return grads_; }
  const std::vector<ParamInfo>& param_info() const { return param_info_; }
  void zero_grad();

  // logits (N, out_channels). training: dropout on and batch-norm batch statistics (and running
  // statistics updated); otherwise no dropout and running statistics. epoch keys dropout masks.
  // `features` is referenced, not copied: keep it alive and unchanged until backward().
  void forward(Tensor& logits, const Tensor& features, GraphContext& graph, bool training,
               std::int64_t epoch);
  // Accumulates parameter gradients from d_logits (N, out_channels) of the last forward
  // (which must have been a training forward; one backward per forward). No gradient is
  // computed for the input features.
  void backward(const Tensor& d_logits, GraphContext& graph);

  // Output of layer `layer` (after its activation, before dropout) from the last forward:
  // node embeddings for users of the library. layer in [0, num_layers).
  const Tensor& embeddings(int layer) const;

  // Batch-norm running statistics (not trained; part of a checkpoint). Empty without BN.
  std::span<float> buffers() { return buffers_; }
  std::span<const float> buffers() const { return buffers_; }
  // Where each buffer sits in buffers(): "bns.0.running_mean", "bns.0.running_var", ...
  const std::vector<ParamInfo>& buffer_info() const { return buffer_info_; }

 private:
  struct State;
  ModelConfig config_;
  std::vector<float> params_;
  std::vector<float> grads_;
  std::vector<float> buffers_;
  std::vector<ParamInfo> param_info_;
  std::vector<ParamInfo> buffer_info_;
  std::unique_ptr<State> state_;
};

}  // namespace tessera
