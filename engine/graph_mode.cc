// SPDX-License-Identifier: Apache-2.0
// --parallel graph (engine/modes.h): one graph part per rank (the whole graph on one process).
// The part's operator (the layer kind's, with global degrees) sits behind a HaloPropagator whose
// exchange moves the boundary rows of every layer, overlapped with the aggregation of the inner
// rows, with the configured codecs; a training step is one forward and backward over the owned
// rows. On GPUs (--device cuda) the features, operator, dropout keys, labels and loss rows are
// uploaded once, and several GPU ranks move halos and gradients over NCCL. On the CPU a part
// whose training is estimated above --memory-budget is refused before its operator is built.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/stall_injection.h"
#include "core/device.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/kernels.h"
#include "engine/halo_propagator.h"
#include "engine/modes.h"
#include "engine/pipeline_mode.h"
#include "engine/planner.h"
#include "engine/system.h"
#include "engine/traffic_model.h"

namespace tessera {
namespace {

// Refuses (InvalidInput) a part whose training is estimated above --memory-budget GiB (else the
// memory of this node, or of the rank's GPU, divided among the `sharing` ranks that use it),
// before its operator is built: the planner's estimate of a graph-mode rank (graph_rank_bytes;
// on a GPU graph_rank_device_bytes, which no GPU has checked), with a step measured on two small
// synthetic graphs of the model's widths on the CPU (measure_step_memory, seconds). Only a part
// whose floor (graph_rank_floor_bytes, no measurement) is above an eighth of the budget is
// measured; the estimate is within eight times the floor (test_planner). `report`: a line on
// stderr.
void check_part_memory(const TrainConfig& config, const GraphPart& part, Device device, int sharing,
                       bool report) {
  const bool cpu = device.kind == DeviceKind::Cpu;
  const double budget =
      stage_memory_budget(config.memory_budget, rank_memory_bytes(device), sharing);
  const DatasetInfo& data = part.dataset;
  const PartShape shape = part_shape(part);
  if (budget <= 0.0 || graph_rank_floor_bytes(config, data, shape) <= budget / 8.0) return;
  const double degree =
      shape.owned > 0 ? static_cast<double>(shape.entries) / static_cast<double>(shape.owned) : 0.0;
  Stopwatch watch;
  const StepMemory step = measure_step_memory(config, data, degree);
  const double need = cpu ? graph_rank_bytes(config, data, shape, step)
                          : graph_rank_device_bytes(config, data, shape, step);
  const std::string needed = gib_text(need), allowed = gib_text(budget);
  const std::string where = cpu ? std::string() : " on " + to_string(device);
  if (report)
    std::fprintf(stderr,
                 "Memory: part %d needs an estimated %s GiB while training, of the %s GiB one rank "
                 "may use%s (--memory-budget; step measured in %.1f s)\n",
                 part.graph.part, needed.c_str(), allowed.c_str(), where.c_str(), watch.seconds());
  TESSERA_CHECK(need <= budget, InvalidInput, "--parallel graph: part ", part.graph.part, " of ",
                part.graph.num_parts, " (", shape.owned, " nodes, ", shape.halo, " halo nodes, ",
                shape.entries, " adjacency entries) needs an estimated ", needed,
                " GiB while training, more than the ", allowed, " GiB one rank may use", where,
                " (--memory-budget; by default ",
                cpu ? "this node's memory divided among its ranks"
                    : "the GPU's memory divided among the ranks on it",
                "); use more ranks, --feature-dtype bf16, a smaller model, or a larger budget "
                "(train_gcn --plan estimates the alternatives)");
}

class GraphRunner final : public ModeRunner {
 public:
  GraphRunner(const TrainConfig& config, GraphPart& part, Communicator& comm)
      : config_(config), part_(part), comm_(comm) {}

  // GPU ranks of a multi-rank job move halos and gradients over a GPU communicator.
  void connect() override {
    DevicePlacement placement = place_on_device(config_, comm_);
    device_ = placement.device;
    ranks_on_gpu_ = placement.ranks_on_gpu;
    gpu_comm_ = std::move(placement.comm);
  }

  void build(const LossRows& loss) override;
  void start(std::int64_t loss_terms) override {
    loss_scale_ = 1.0f / static_cast<float>(loss_terms);
  }
  // The adaptive codec's receiver weights, between the peers.
  void wire() override {
    if (!config_.adaptive()) return;
    stall_if_injected(comm_.rank(), "sharing the receiver weights");
    try {
      propagator_->share_receiver_weights();
    } catch (const Error& e) {
      throw Error(e.category(),
                  "sharing the receiver weights of the adaptive codec: " + e.message(), __FILE__,
                  __LINE__);
    }
  }

  std::int64_t operator_nnz() const override { return propagator_->nnz(); }
  ParallelInfo info() const override {
    ParallelInfo p;
    p.mode = comm_.size() > 1 ? "graph" : "single";
    p.parts = comm_.size();
    return p;
  }
  Device device() const override { return device_; }
  Communicator& gradient_comm() override { return gpu_comm_ ? *gpu_comm_ : comm_; }

  void begin_run() override { exchange_->reset_residuals(); }
  std::string begin_epoch(int epoch, std::uint64_t seed) override {
    exchange_->reset_times();
    exchange_->set_noise(seed, static_cast<std::uint64_t>(epoch));
    bn_reduce_s_ = 0.0;
    const bool replan = config_.adaptive() && epoch > 1 && (epoch - 1) % config_.replan_every == 0;
    return replan ? exchange_->replan() : std::string();
  }
  double train_step(Model& model, int epoch, std::uint64_t) override {
    const bool multiclass = part_.dataset.task == TaskType::MultiClass;
    model.forward(logits_, *features_, context_, /*training=*/true, epoch);
    const double loss = loss_and_gradient(d_logits_, logp_, logits_, multiclass, labels_, *targets_,
                                          loss_rows_, loss_scale_);
    model.backward(d_logits_, context_);
    model.release_gradients();  // their blocks serve the evaluation and the next forward
    return loss;
  }
  const Tensor* evaluate(Model& model, int epoch) override {
    model.forward(logits_, *features_, context_, /*training=*/false, epoch);
    return logits_on_host(logits_, host_logits_);
  }
  // The halo exchanges, plus batch norm's all-reduces inside the step (blocking).
  ExchangeTimes times() const override {
    ExchangeTimes t = exchange_->times();
    t.comm_s += bn_reduce_s_;
    t.exposed_s += bn_reduce_s_;
    return t;
  }

 private:
  void place_data();

  const TrainConfig& config_;
  GraphPart& part_;
  Communicator& comm_;
  Device device_;
  int ranks_on_gpu_ = 1;  // the job's ranks on this rank's GPU, itself included
  // Several GPU ranks: the communicator of their halos and gradients (traffic counted in comm_'s
  // counter).
  std::unique_ptr<Communicator> gpu_comm_;
  std::unique_ptr<HaloExchange> exchange_;
  std::unique_ptr<HaloPropagator> propagator_;
  GraphContext context_;
  float loss_scale_ = 1.0f;
  double bn_reduce_s_ = 0.0;  // batch norm's all-reduces in the last step
  std::vector<NodeId> train_loss_rows_;
  Tensor logits_, logp_, d_logits_;  // (N, C), on device_
  Tensor host_logits_;               // (N, C) the logits copied back for the metrics
  // What the steps read, on the training device: on the CPU the part's own tensors, on a GPU
  // copies uploaded once (place_data). A step then moves no tensor to or from the host but the
  // loss, the batch-norm statistics (2F values a layer) and, on evaluated epochs, the logits.
  const Tensor* features_ = nullptr;      // part.features or device_features_
  const Tensor* targets_ = nullptr;       // part.targets or device_targets_
  std::span<const std::int64_t> labels_;  // part.labels or device_labels_
  std::span<const NodeId> loss_rows_;     // train_loss_rows_ or device_loss_rows_
  Tensor device_features_;                // (N, F) the features on a GPU (empty on the CPU)
  Tensor device_targets_;                 // (N, T) multi-label targets on a GPU
  Tensor device_ids_;                     // (N, 1) i64 global ids (dropout keys) on a GPU
  Tensor device_labels_;                  // (N, 1) i64 labels on a GPU
  Tensor device_loss_rows_;               // (R, 1) i32 labelled training rows on a GPU
};

void GraphRunner::build(const LossRows& loss) {
  LocalGraph& g = part_.graph;
  TESSERA_CHECK(g.num_parts == comm_.size() && g.part == comm_.rank(), InvalidArgument, "part ",
                g.part, " of ", g.num_parts, " given to rank ", comm_.rank(), " of ", comm_.size());
  check_part_memory(config_, part_, device_, ranks_sharing_memory(device_, ranks_on_gpu_, comm_),
                    config_.verbosity >= 1 && comm_.rank() == 0);
  ExchangeCodecs codecs;
  codecs.adaptive = config_.adaptive();
  codecs.forward = config_.forward_codec();
  codecs.backward = config_.backward_codec();
  codecs.error_feedback = config_.error_feedback;
  codecs.bit_budget = config_.bit_budget;
  codecs.num_layers = config_.num_layers;
  exchange_ = std::make_unique<HaloExchange>(gpu_comm_ ? *gpu_comm_ : comm_, g.halo, g.owned_ids,
                                             g.halo_ids, codecs);
  const GraphOperator& op = *config_.kind()->op;
  // Attention kinds weight the edges themselves: the propagator keeps the pattern and the
  // global ids of its columns (the attention dropout's keys).
  std::vector<GlobalId> column_ids;
  if (config_.kind()->attention) {
    column_ids.assign(g.owned_ids.begin(), g.owned_ids.end());
    column_ids.insert(column_ids.end(), g.halo_ids.begin(), g.halo_ids.end());
  }
  // From here the operator is the part's graph: the adjacency's arrays become the operator's,
  // which the propagator splits into its blocks in place (a trainer builds its runner once).
  Csr weighted = op.build(std::move(g.adjacency), g.degrees);
  g.adjacency = Csr();
  propagator_ =
      std::make_unique<HaloPropagator>(std::move(weighted), op.symmetry, *exchange_, column_ids);
  propagator_->upload(device_);
  propagator_->set_operand_dtype(config_.aggregation_dtype());
  // The halo buffers once, at the widest exchange of the model: every layer reuses them.
  propagator_->reserve(
      widest_exchange(exchanged_widths(config_.num_layers, part_.dataset.num_features,
                                       config_.hidden_channels, part_.dataset.num_outputs(),
                                       config_.kind(), config_.hyper())),
      device_);
  context_.set_propagator(op, propagator_.get());
  context_.global_ids = g.owned_ids;
  context_.global_num_nodes = part_.dataset.num_nodes;
  context_.all_reduce = [this](std::span<double> values) {
    Stopwatch reduce;
    comm_.all_reduce_sum(values, TrafficCategory::AllReduce);
    bn_reduce_s_ += reduce.seconds();
  };
  train_loss_rows_ = loss.rows;
  place_data();
}

void GraphRunner::place_data() {
  if (config_.features_dtype() == DType::BF16 && part_.features.dtype() != DType::BF16) {
    // Rounded once, in place of the f32 rows: every kernel that reads them widens them. The f32
    // rows' block goes back to the system (the block cache would keep it for a tensor of its
    // size, which training does not make).
    Tensor rounded(part_.features.rows(), part_.features.cols(), DType::BF16);
    to_bf16(rounded, part_.features);
    part_.features = std::move(rounded);
    host_block_cache().trim();
  }
  features_ = &part_.features;
  targets_ = &part_.targets;
  labels_ = part_.labels;
  loss_rows_ = train_loss_rows_;
  if (device_.kind == DeviceKind::Cpu) return;
  device_features_ = part_.features.to(device_);
  features_ = &device_features_;
  if (!part_.targets.empty()) {
    device_targets_ = part_.targets.to(device_);
    targets_ = &device_targets_;
  }
  // Index lists, uploaded once; the kernels read GPU spans in place.
  device_ids_ = index_tensor(std::span<const GlobalId>(part_.graph.owned_ids), device_);
  context_.global_ids = {device_ids_.data<GlobalId>(), part_.graph.owned_ids.size()};
  device_labels_ = index_tensor(std::span<const std::int64_t>(part_.labels), device_);
  labels_ = {device_labels_.data<std::int64_t>(), part_.labels.size()};
  device_loss_rows_ = index_tensor(std::span<const NodeId>(train_loss_rows_), device_);
  loss_rows_ = {device_loss_rows_.data<NodeId>(), train_loss_rows_.size()};
}

std::unique_ptr<ModeRunner> make_graph_runner(const TrainConfig& config, GraphPart& part,
                                              Communicator& comm) {
  return std::make_unique<GraphRunner>(config, part, comm);
}

void validate_graph(const TrainConfig&) {}  // the option table says all (--stages, --chunks)

}  // namespace

extern const ModeSpec kGraphParallel;
const ModeSpec kGraphParallel = {
    .mode = ParallelMode::Graph,
    .name = "graph",
    .help = "one graph part per rank, halo rows exchanged at every layer",
    .validate = validate_graph,
    .make = make_graph_runner,
};

}  // namespace tessera
