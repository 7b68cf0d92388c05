// SPDX-License-Identifier: Apache-2.0
// What a Trainer keeps (engine/trainer.h's Impl and RunState), shared by the files that define
// its members: trainer.cc (set-up, the epoch loop, runs) and trainer_checkpoints.cc (resume,
// save, restore). Private to the engine.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "engine/fault_injection.h"
#include "engine/optimizer.h"
#include "engine/trainer.h"

namespace tessera {

inline constexpr int kCategories = static_cast<int>(TrafficCategory::Count);

// Where each parameter and buffer value of a rank's model sits in the whole model's (a
// checkpoint holds the whole model; engine/trainer_checkpoints.cc); empty when it is whole.
struct ModelIndex {
  std::vector<GlobalId> params, buffers;
  std::int64_t whole_params = 0, whole_buffers = 0;
  bool known = false;  // the same in every run: indexed once
};

struct Trainer::Impl {
  GraphPart part;
  std::unique_ptr<Communicator> own_comm;  // the SelfCommunicator of a single-process trainer
  Communicator* comm = nullptr;
  std::unique_ptr<ModeRunner> runner;
  GraphTotals totals;
  std::int64_t loss_terms = 0;  // over all ranks
  FaultInjection fault;
  std::vector<EpochRecord> history;  // train(): every record so far (checkpoints hold them)
  std::vector<RunResult> finished;   // train(): the runs finished so far
  std::unique_ptr<Model> model;
  ModelIndex model_index;
};

struct Trainer::RunState {
  int run = 0;
  int epoch = 0;  // epochs completed
  RunResult result;
  std::array<double, kCategories> bytes_total{}, raw_total{};
  std::unique_ptr<Adam> adam;
  int local_stop = 0;  // the stop signal this rank saw when the run stopped
  // --restore-best: the weights after the best validation epoch so far (host copies).
  std::vector<float> best_params, best_buffers;
};

// Sets the model's parameters and batch-norm buffers; InvalidInput naming `source` (a checkpoint,
// a model file) when their sizes are not the model's.
// Fills `index` for `slice`, a slice of the model `whole` describes (left empty when it is the
// whole model), unless it is known already.
void index_model_slice(ModelIndex& index, const Model& slice, const ModelConfig& whole);

void set_model_weights(Model& model, std::span<const float> params, std::span<const float> buffers,
                       const char* source);

}  // namespace tessera
