// SPDX-License-Identifier: Apache-2.0
// Layer-level pipeline parallelism (GNNPipe, Chen et al. 2023) and its hybrid with graph
// parallelism. K = G x S ranks: G graph parts (G = 1 in pipeline mode), each trained by a
// pipeline of S stages; rank g*S + s runs stage s (consecutive layers, balanced by estimated
// cost) over the whole of part g. The part is cut into C chunks (METIS) that stream through the
// stages like micro-batches, forward (embeddings) and backward (their gradients), in the 1F1B
// order, with the weights fixed for the epoch and one optimizer step per stage after the drain.
// A chunk aggregates over the stage's historical buffers (engine/chunk_graph.h): this epoch's
// rows of the chunks already done, the previous epoch's for the others, so only the chunk's own
// rows cross the stage boundary: ~2 (S-1) N H values per epoch whatever the depth.
// Hybrid adds, after each epoch, a halo exchange between the parts at the stage level (the
// boundary rows of every layer's buffers, staleness one epoch; a PartExchange, engine/
// hybrid_mode.cc) and an all-reduce of each stage's weight gradients over the G parts.
// Evaluation is exact: a layer-by-layer pass with fresh halos, no chunks.
// On a GPU the stage's tensors (operator blocks, historical buffers, chunk features, labels and
// activations, encoded messages) live on the device, and the streams and halo exchanges go
// through a GPU communicator (NCCL, or staged over MPI) without host round trips; the loss, the
// logits of an evaluated epoch and checkpoints are what come back to the host.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/halo_exchange.h"
#include "core/halo_plan.h"
#include "engine/chunk_graph.h"
#include "engine/mode_runner.h"
#include "engine/train_config.h"
#include "layers/model.h"
#include "partition/graph_part.h"

namespace tessera {

struct PipelineLayout {
  ParallelMode mode = ParallelMode::Pipeline;
  int groups = 1;  // G graph parts
  int stages = 1;  // S stages per part
  int group = 0;   // this rank's part and stage: rank = group * stages + stage
  int stage = 0;
  int chunks = 1;  // per part
  std::vector<int> stage_first{0, 1};  // (S + 1) first layer of every stage, then L
  int first_layer() const { return stage_first[static_cast<std::size_t>(stage)]; }
  int num_layers() const { return stage_first[static_cast<std::size_t>(stage) + 1] - first_layer(); }
  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage + 1 == stages; }
};

// Estimated cost of every layer of a model on a graph of `nodes` nodes and `nnz` operator
// entries: 2 nnz w (SpMM over the aggregated width w) + 2 N F_in F_out (the GEMM).
std::vector<double> layer_costs(ModelKind kind, int layers, std::int64_t in_channels,
                                std::int64_t hidden, std::int64_t out_channels,
                                std::int64_t nodes, std::int64_t nnz);
// Boundaries (S + 1) of S runs of consecutive layers (each >= 1 layer) minimising the costliest
// run. InvalidArgument when stages > layers.
std::vector<int> balance_layers(std::span<const double> cost, int stages);
// The layout of this rank: checks --stages and --chunks against the ranks and the layers and
// assigns the layers (InvalidArgument naming the flag, before anything is loaded).
PipelineLayout pipeline_layout(const TrainConfig& config, int rank, int ranks,
                               std::span<const double> layer_cost);

// Estimated bytes one stage holds while training: for each of its layers the historical buffers
// and the activations and workspaces of the layer over all chunks, plus the operator and (first
// stage) the features. The buffers of a layer are min(F_in, F_out) wide, or what an attention
// layer exchanges (heads and source terms, LayerKind::halo_widths), which also keeps per-edge
// weights and their gradients for every chunk.
struct StageMemory {
  std::int64_t nodes = 0, halo_nodes = 0, nnz = 0, features = 0;
  std::uint64_t bytes = 0;
};
StageMemory estimate_stage_memory(const PipelineLayout& layout, ModelKind kind,
                                  std::int64_t in_channels, std::int64_t hidden,
                                  std::int64_t out_channels, std::int64_t nodes,
                                  std::int64_t halo_nodes, std::int64_t nnz,
                                  const LayerHyper& hyper = {});

// What hybrid mode adds between the G parts at one stage: after each epoch the halo rows of the
// stage's historical buffers (and the gradient contributions to other parts' rows), and the
// propagator of the exact evaluation pass, with fresh halos. Pipeline mode has none.
class PartExchange {
 public:
  virtual ~PartExchange() = default;
  virtual void reset() = 0;  // a new run
  // Refreshes the halo rows of the buffers of layers [first, first + count) of `history` after
  // the epoch's chunks, with `op` the part's operator in chunk order. `restored`: the buffers
  // come from a checkpoint (pushed layers keep the other parts' contributions it held, as their
  // halo_grads are gone).
  virtual void refresh(History& history, const ChunkedOperator& op, int first, int count,
                       std::int64_t epoch, std::uint64_t seed, bool restored) = 0;
  virtual std::unique_ptr<Propagator> eval_propagator(const Csr& whole,
                                                      MatrixSymmetry symmetry) = 0;
  virtual ExchangeTimes times() const = 0;  // of the last refresh
};
// Makes the PartExchange of a stage over `stage_comm` (this stage in every part) from the part's
// halo plan with rows in chunk order and its ids; the arguments outlive it.
using PartExchangeFactory = std::function<std::unique_ptr<PartExchange>(
    Communicator& stage_comm, const HaloPlan& plan, std::span<const GlobalId> owned_ids,
    std::span<const GlobalId> halo_ids)>;

class PipelineEngine {
 public:
  // Local. `pipe_comm` and `stage_comm` are this part's stages (rank = stage) and this stage in
  // every part (rank = part), split from the job's communicator (pipeline_comms). `part` is
  // this rank's group's part (owned rows in local order); `op` (N, N + H) its normalised
  // operator; loss_rows the local rows with a training label. The engine keeps what it needs
  // (features of its chunks on the first stage, labels on the last) and releases
  // part.features. The stage trains on `device` (the communicators move its memory).
  // `part_exchange` (hybrid) makes the exchange between the parts. Throws InvalidArgument when
  // the layout does not fit.
  PipelineEngine(const TrainConfig& config, const PipelineLayout& layout, GraphPart& part,
                 std::unique_ptr<Communicator> pipe_comm, std::unique_ptr<Communicator> stage_comm,
                 const Csr& op, MatrixSymmetry owned_symmetry, std::span<const NodeId> loss_rows,
                 std::int64_t loss_terms_total, Device device,
                 const PartExchangeFactory& part_exchange = {});
  ~PipelineEngine();

  const PipelineLayout& layout() const { return layout_; }
  // This stage's slice of the whole model (with one slot per chunk, and one for evaluation).
  ModelConfig stage_model(const ModelConfig& whole) const;
  // The ranks of this stage in every part: where its weight gradients are all-reduced.
  Communicator& stage_comm() { return *stage_comm_; }
  std::int64_t operator_nnz() const { return op_->whole().nnz(); }

  // Forgets the historical buffers (a new run starts from a new model).
  void reset_run();
  // One epoch of training: every chunk forward and backward through this stage, gradients
  // accumulated into model.grads(); in hybrid mode the halo rows of the buffers refreshed after.
  // Returns this rank's training loss sum (last stage; 0 elsewhere).
  double train_step(Model& model, std::int64_t epoch, std::uint64_t seed);
  // Exact forward of the whole part (no chunks, fresh halos). On the last stage `logits` gets
  // (N, C) in local row order, on the stage's device; elsewhere it is emptied.
  void evaluate(Model& model, Tensor& logits, std::int64_t epoch);
  // Communication of the last train_step: stream waits and halo exchanges.
  ExchangeTimes times() const;

  // Checkpoints (engine/mode_runner.h). save_history: every layer's historical buffers as
  // (num_nodes, F) arrays in node-id order on rank 0 of `world` ("history.L.inputs", and
  // "history.L.grads" where a backward aggregated gradients, "history.L.remote_grads" for the
  // pushed layers of hybrid mode); collective over `world`.
  // restore_history: this stage's layers from such arrays (absent ones: a new run's zeros);
  // local. refresh_restored: in hybrid mode, the halo refresh of the epoch they were taken
  // after (the halo rows and the other parts' gradient contributions follow from the buffers).
  std::vector<NodeArray> save_history(Communicator& world);
  void restore_history(const std::vector<NodeArray>& arrays);
  void refresh_restored(std::int64_t epoch, std::uint64_t seed);

 private:
  struct Chunk;
  void place_chunks(const GraphPart& part, std::span<const NodeId> loss_rows);
  void forward_chunk(Model& model, int c, std::int64_t epoch, std::uint64_t seed);
  void backward_chunk(Model& model, int c, std::int64_t epoch, std::uint64_t seed);
  // Sends rows of x (one chunk) to the neighbouring stage `peer` (pipe ranks), encoded with
  // `codec`, keyed for the noise by `layer`; keeps the message alive in `bytes` (u8, on the
  // stage's device) until waited.
  void send_rows(const Tensor& x, int c, int peer, int tag, int layer, bool backward,
                 std::uint64_t seed, std::int64_t epoch, Tensor& bytes);
  void receive_rows(Tensor& x, int c, std::int64_t width, int peer, int tag, bool backward,
                    Tensor& bytes);

  const TrainConfig& config_;
  PipelineLayout layout_;
  Device device_;
  std::unique_ptr<Communicator> pipe_comm_;   // this part's stages, rank = stage
  std::unique_ptr<Communicator> stage_comm_;  // this stage in every part, rank = group
  ChunkLayout chunks_;
  std::unique_ptr<ChunkedOperator> op_;
  std::unique_ptr<History> history_;
  std::vector<GlobalId> owned_ids_;  // (N) in chunk order
  Tensor device_ids_;                // (N, 1) i64 owned_ids_ on the device: dropout and noise keys
  DeviceIndexList order_list_;       // chunks_.order: the evaluation's logits back to local order
  std::vector<GlobalId> halo_ids_;
  HaloPlan halo_plan_;               // send rows in chunk order
  std::unique_ptr<PartExchange> part_exchange_;  // hybrid
  std::unique_ptr<Propagator> eval_propagator_;
  CodecKind forward_codec_ = CodecKind::None, backward_codec_ = CodecKind::None;
  std::int64_t global_nodes_ = 0;
  float loss_scale_ = 1.0f;
  bool multiclass_ = true;
  std::vector<Chunk> chunk_state_;
  std::vector<std::unique_ptr<Request>> sends_;
  std::vector<NodeId> identity_;  // 0, 1, 2, ... (largest chunk): a chunk's rows in message order
  DeviceIndexList identity_list_;
  double loss_sum_ = 0.0;
  double wait_s_ = 0.0;  // blocked on stream messages in the last step
  double encode_s_ = 0.0, decode_s_ = 0.0;
  ExchangeTimes halo_times_;  // of the last refresh between the parts (hybrid)
};

}  // namespace tessera
