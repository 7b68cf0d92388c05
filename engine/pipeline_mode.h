// SPDX-License-Identifier: Apache-2.0
// The runner of the pipelined modes (--parallel pipeline and hybrid, engine/modes.h): this rank's
// place in the layout (part, stage, layers), the stage memory check, and the PipelineEngine
// (engine/pipeline.h) that streams the chunks. Hybrid mode (engine/hybrid_mode.cc) is this
// runner with a PartExchange between the parts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/mode_runner.h"
#include "engine/pipeline.h"

namespace tessera {

// The bytes one rank's stage may use: --memory-budget GiB when given, else `memory` (its GPU's,
// or its node's) divided among the `sharing` ranks that use that memory.
double stage_memory_budget(double memory_budget_gib, double memory, int sharing);
// The memory a rank on `device` draws from: this node's (physical_memory_bytes) or its GPU's.
double rank_memory_bytes(Device device);
// The ranks that share the memory rank_memory_bytes(device) gives: `ranks_on_gpu` on a GPU, else
// those of `comm` on this node (1 if it is not MPI's).
int ranks_sharing_memory(Device device, int ranks_on_gpu, const Communicator& comm);
// `bytes` in GiB to three significant digits, as the memory checks print them.
std::string gib_text(double bytes);

class PipelineRunner final : public ModeRunner {
 public:
  PipelineRunner(const TrainConfig& config, GraphPart& part, Communicator& comm,
                 PartExchangeFactory part_exchange = {});
  ~PipelineRunner() override;

  void connect() override;
  void build(const LossRows& loss) override;
  void start(std::int64_t loss_terms) override;
  bool counts_part() const override { return layout_->first_stage(); }
  std::int64_t operator_nnz() const override { return operator_nnz_; }
  ParallelInfo info() const override;
  Device device() const override { return device_; }
  ModelConfig model_config(const ModelConfig& whole) const override;
  Communicator& gradient_comm() override { return engine_->stage_comm(); }
  bool holds_model_copy() const override { return layout_->group == 0; }
  std::vector<NodeArray> save_state() override { return engine_->save_history(comm_); }
  void restore_state(const std::vector<NodeArray>& arrays) override {
    engine_->restore_history(arrays);
  }
  void after_restore(int epoch, std::uint64_t seed) override {
    engine_->refresh_restored(epoch, seed);
  }
  void begin_run() override { engine_->reset_run(); }
  std::string begin_epoch(int, std::uint64_t) override { return {}; }
  double train_step(Model& model, int epoch, std::uint64_t seed) override;
  const Tensor* evaluate(Model& model, int epoch) override;
  ExchangeTimes times() const override { return engine_->times(); }

 private:
  const TrainConfig& config_;
  GraphPart& part_;
  Communicator& comm_;
  PartExchangeFactory part_exchange_;
  Device device_;
  int ranks_on_gpu_ = 1;                    // ranks sharing device_'s memory (--gpu-comm mpi)
  std::unique_ptr<Communicator> gpu_comm_;  // GPU ranks of a multi-rank job: what the two split
  std::optional<PipelineLayout> layout_;
  std::unique_ptr<Communicator> pipe_comm_, stage_comm_;  // until the engine takes them
  Csr operator_;  // until the engine takes it
  std::int64_t operator_nnz_ = 0;
  std::vector<NodeId> loss_rows_;
  std::unique_ptr<PipelineEngine> engine_;
  Tensor logits_;       // (N, C) last stage, local row order, on device_
  Tensor host_logits_;  // the logits copied back for the metrics (GPU)
};

// The rules of both pipelined modes beyond the option table: enough chunks for the stages.
void validate_pipelined(const TrainConfig& config);

}  // namespace tessera
