// SPDX-License-Identifier: Apache-2.0
// --parallel pipeline (engine/modes.h): the PipelineRunner shared with hybrid mode and the
// mode's entry in the table. The stage memory check refuses, before training, a stage whose
// estimate exceeds the budget.
#include "engine/pipeline_mode.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "comm/agreement.h"
#include "comm/mpi_communicator.h"
#include "core/error.h"
#include "engine/modes.h"
#include "engine/system.h"

namespace tessera {
namespace {

// Refuses (InvalidInput) a stage whose estimated memory exceeds --memory-budget GiB, else the
// memory of the stage's GPU or of this node, divided among the `sharing` ranks that use it.
void check_stage_memory(const TrainConfig& config, const PipelineLayout& layout,
                        const GraphPart& part, std::int64_t nnz, Device device, int sharing) {
  const DatasetInfo& data = part.dataset;
  const StageMemory m = estimate_stage_memory(
      layout, config.kind(), data.num_features, config.hidden_channels, data.num_outputs(),
      part.graph.num_owned(), part.graph.num_halo(), nnz, config.hyper());
  const bool given = config.memory_budget > 0.0;
  const double budget =
      stage_memory_budget(config.memory_budget, rank_memory_bytes(device), sharing);
  const std::string need = gib_text(static_cast<double>(m.bytes)), have = gib_text(budget);
  TESSERA_CHECK(budget <= 0.0 || static_cast<double>(m.bytes) <= budget, InvalidInput,
                "--parallel ", to_string(layout.mode), ": stage ", layout.stage, " (layers ",
                layout.first_layer(), "-", layout.first_layer() + layout.num_layers() - 1,
                ") of part ", layout.group, " needs an estimated ", need, " GiB (", m.nodes,
                " nodes, ", m.halo_nodes, " halo nodes, ", m.nnz,
                " operator entries), more than the ", have, " GiB one rank may use on ",
                to_string(device),
                !given && sharing > 1 ? " (shared by " + std::to_string(sharing) + " ranks)" : "",
                " (--memory-budget); use --parallel hybrid with more "
                "graph parts, more stages, or a larger budget");
}

}  // namespace

double stage_memory_budget(double memory_budget_gib, double memory, int sharing) {
  if (memory_budget_gib > 0.0) return memory_budget_gib * 1024.0 * 1024.0 * 1024.0;
  return memory / std::max(1, sharing);
}

double rank_memory_bytes(Device device) {
  return static_cast<double>(device.kind == DeviceKind::Cpu ? physical_memory_bytes()
                                                            : gpu_memory_bytes(device));
}

int ranks_sharing_memory(Device device, int ranks_on_gpu, const Communicator& comm) {
  if (device.kind != DeviceKind::Cpu) return ranks_on_gpu;
  const auto* mpi = dynamic_cast<const MpiCommunicator*>(&comm);
  return mpi != nullptr ? mpi->ranks_on_node() : 1;
}

std::string gib_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

namespace {

std::unique_ptr<ModeRunner> make_pipeline_runner(const TrainConfig& config, GraphPart& part,
                                                 Communicator& comm) {
  return std::make_unique<PipelineRunner>(config, part, comm);
}

}  // namespace

PipelineRunner::PipelineRunner(const TrainConfig& config, GraphPart& part, Communicator& comm,
                               PartExchangeFactory part_exchange)
    : config_(config), part_(part), comm_(comm), part_exchange_(std::move(part_exchange)) {}

PipelineRunner::~PipelineRunner() = default;

// The layout (agreed: it checks the flags against the ranks and layers), then this part's
// stages and this stage's parts as communicators (collective, under --comm-timeout): split from
// the GPU communicator on GPU ranks, so that the streams and halos move device memory.
void PipelineRunner::connect() {
  run_agreed(comm_, "laying out the pipeline", [&] {
    const DatasetInfo& data = part_.dataset;
    const std::vector<double> cost =
        layer_costs(config_.kind(), config_.num_layers, data.num_features, config_.hidden_channels,
                    data.num_outputs(), data.num_nodes, 2 * data.num_edges + data.num_nodes);
    layout_ = pipeline_layout(config_, comm_.rank(), comm_.size(), cost);
  });
  DevicePlacement placement = place_on_device(config_, comm_);
  device_ = placement.device;
  ranks_on_gpu_ = placement.ranks_on_gpu;
  gpu_comm_ = std::move(placement.comm);
  Communicator& base = gpu_comm_ ? *gpu_comm_ : comm_;
  pipe_comm_ = base.split(layout_->group, layout_->stage);
  stage_comm_ = base.split(layout_->stage, layout_->group);
}

void PipelineRunner::build(const LossRows& loss) {
  TESSERA_CHECK(part_.graph.num_parts == layout_->groups && part_.graph.part == layout_->group,
                InvalidArgument, "part ", part_.graph.part, " of ", part_.graph.num_parts,
                " given to rank ", comm_.rank(), ", which trains part ", layout_->group, " of ",
                layout_->groups);
  const LocalGraph& g = part_.graph;
  operator_ = config_.kind()->op->build(g.adjacency, g.degrees);
  operator_nnz_ = operator_.nnz();
  check_stage_memory(config_, *layout_, part_, operator_nnz_, device_,
                     ranks_sharing_memory(device_, ranks_on_gpu_, comm_));
  loss_rows_ = loss.rows;
}

void PipelineRunner::start(std::int64_t loss_terms) {
  engine_ = std::make_unique<PipelineEngine>(
      config_, *layout_, part_, std::move(pipe_comm_), std::move(stage_comm_), operator_,
      config_.kind()->op->symmetry, loss_rows_, loss_terms, device_, part_exchange_);
  operator_ = Csr();
}

ParallelInfo PipelineRunner::info() const {
  ParallelInfo p;
  p.mode = to_string(layout_->mode);
  p.parts = layout_->groups;
  p.stages = layout_->stages;
  p.chunks = layout_->chunks;
  p.stage_first_layer.assign(layout_->stage_first.begin(), layout_->stage_first.end() - 1);
  return p;
}

ModelConfig PipelineRunner::model_config(const ModelConfig& whole) const {
  return engine_->stage_model(whole);
}

double PipelineRunner::train_step(Model& model, int epoch, std::uint64_t seed) {
  return engine_->train_step(model, epoch, seed);
}

const Tensor* PipelineRunner::evaluate(Model& model, int epoch) {
  engine_->evaluate(model, logits_, epoch);
  return layout_->last_stage() ? logits_on_host(logits_, host_logits_) : nullptr;
}

void validate_pipelined(const TrainConfig& c) {
  TESSERA_CHECK(c.chunks == 0 || c.stages == 0 || c.chunks >= c.stages, InvalidArgument,
                "--chunks ", c.chunks, " < --stages ", c.stages,
                ": every stage needs a chunk to work on (use --chunks >= ", c.stages, ")");
}

extern const ModeSpec kPipelineParallel;
const ModeSpec kPipelineParallel = {
    .mode = ParallelMode::Pipeline,
    .name = "pipeline",
    .help =
        "one stage of consecutive layers per rank over the whole graph, chunks streamed "
        "between stages (GNNPipe)",
    .validate = validate_pipelined,
    .make = make_pipeline_runner,
};

}  // namespace tessera
