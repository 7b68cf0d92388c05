// SPDX-License-Identifier: Apache-2.0
// ModeRunner: what differs between the parallel modes (engine/modes.h) behind one interface.
// The Trainer (engine/trainer.h) writes the rest of a training run once for every mode: the
// epoch loop, the optimizer, the gradient all-reduce, the metrics, checkpoints and stop signals.
// A runner holds one rank's share of the work: its graph operators and exchanges, where its
// model slice lives, and how one training step and one evaluation pass run there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/halo_exchange.h"
#include "core/device.h"
#include "core/tensor.h"
#include "engine/loss.h"
#include "layers/model.h"

namespace tessera {

// How the ranks shared the work, for reports: the mode ("single", "graph", "pipeline" or
// "hybrid"), the graph parts, the pipeline stages per part with the first layer of each, and
// the chunks.
struct ParallelInfo {
  std::string mode = "single";
  int parts = 1;
  int stages = 1;
  int chunks = 1;
  std::vector<int> stage_first_layer{0};  // (stages)
};

// A runner's state that outlives an epoch besides the model (a pipeline's historical buffers),
// as a checkpoint holds it: one (num_nodes, cols) array in node-id order per name, so that it
// does not depend on how the ranks share the work.
struct NodeArray {
  std::string name;  // e.g. "history.1.inputs"
  Tensor values;
};

class ModeRunner {
 public:
  virtual ~ModeRunner() = default;

  // Set-up, called by the Trainer in this order on every rank. Local work runs inside agreed
  // phases (comm/agreement.h), so that a failure on one rank ends every rank at once with its
  // message; communication runs outside them, every call under --comm-timeout:
  //   connect()      communicators before the local set-up (GPU communicators, pipeline
  //                  groups); agrees on its own local checks
  //   build(loss)    local work only (agreed): operators, exchanges, data placement; `loss`
  //                  are the part's training rows with labels
  //   start(terms)   local work only (agreed) once the loss terms of all ranks are known
  //   wire()         point-to-point set-up between peers once every rank has started
  virtual void connect() {}
  virtual void build(const LossRows& loss) = 0;
  virtual void start(std::int64_t loss_terms) = 0;
  virtual void wire() {}

  // Whether this rank's rows count in the totals over ranks (each part once).
  virtual bool counts_part() const { return true; }
  virtual std::int64_t operator_nnz() const = 0;  // entries of this rank's operator
  virtual ParallelInfo info() const = 0;
  // The slice of the whole model this rank trains, where it lives, and where its weight
  // gradients are summed (all ranks, or this stage's ranks in every part).
  virtual ModelConfig model_config(const ModelConfig& whole) const { return whole; }
  virtual Device device() const { return Device::cpu(); }
  virtual Communicator& gradient_comm() = 0;
  // Whether this rank's model slice is one of the copies a checkpoint is gathered from (every
  // layer once: all ranks in graph mode, where rank 0 alone is read; the stages of part 0 in
  // the pipelined modes).
  virtual bool holds_model_copy() const { return true; }

  // Checkpoints. save_state: the runner's state after the epochs so far, gathered on rank 0
  // (empty elsewhere, and in modes that keep none). Collective. restore_state: local, from a
  // checkpoint's arrays (those of another mode or layout may be absent: the state then starts
  // as a new run's); InvalidInput when an array has the wrong shape. after_restore (when the
  // checkpoint had arrays): the collective work that rebuilds what follows from them, as after
  // epoch `epoch` of a run with `seed`.
  virtual std::vector<NodeArray> save_state() { return {}; }
  virtual void restore_state(const std::vector<NodeArray>& /*arrays*/) {}
  virtual void after_restore(int /*epoch*/, std::uint64_t /*seed*/) {}

  // A run starts from a new model: residuals and historical buffers are forgotten.
  virtual void begin_run() = 0;
  // Before an epoch's step (outside its traffic): the noise keys; returns the new bit plan on
  // the epochs the adaptive codec re-plans, else "".
  virtual std::string begin_epoch(int epoch, std::uint64_t seed) = 0;
  // One training step's forward and backward, parameter gradients accumulated into the model;
  // returns this rank's loss sum (unscaled by nothing: each term already divided by the terms
  // over all ranks).
  virtual double train_step(Model& model, int epoch, std::uint64_t seed) = 0;
  // The exact (evaluation) forward; host logits (N, C) of this rank's rows in local order, or
  // null when this rank scores no rows (a pipeline stage before the last).
  virtual const Tensor* evaluate(Model& model, int epoch) = 0;
  // Communication of the last step (halo exchanges, stream waits, blocking collectives other
  // than the gradient all-reduce).
  virtual ExchangeTimes times() const = 0;
};

}  // namespace tessera
