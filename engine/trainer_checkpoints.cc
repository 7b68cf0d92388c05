// SPDX-License-Identifier: Apache-2.0
// The Trainer's checkpoints (engine/checkpoint.h has the file format and the lookup): finding
// the checkpoint to resume from and sending it to every rank, restoring a run from it, and
// writing one (rank 0) with the model, Adam's state and the records so far.
#include "comm/agreement.h"
#include "core/error.h"
#include "engine/checkpoint.h"
#include "engine/trainer_state.h"

namespace tessera {

void Trainer::restore_run(RunState& state, const CheckpointState& checkpoint) {
  Impl& s = *impl_;
  run_agreed(*s.comm, "restoring the checkpoint", [&] {
    TESSERA_CHECK(checkpoint.epoch >= 0 && checkpoint.epoch <= config_.epochs &&
                      checkpoint.adam_steps == checkpoint.epoch,
                  InvalidInput, "checkpoint at epoch ", checkpoint.epoch, " with ",
                  checkpoint.adam_steps, " optimizer steps does not fit --epochs ", config_.epochs);
    set_model_weights(*s.model, checkpoint.params, checkpoint.buffers, "checkpoint");
    state.adam->restore(checkpoint.adam_steps, checkpoint.adam_m, checkpoint.adam_v);
    state.epoch = checkpoint.epoch;
    state.result = checkpoint.current;
    state.bytes_total = checkpoint.bytes_total;
    state.raw_total = checkpoint.raw_total;
    state.best_params = checkpoint.best_params;
    state.best_buffers = checkpoint.best_buffers;
  });
}

std::string Trainer::save_checkpoint(const RunState& state, std::uint64_t partition) {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  std::string path;
  run_agreed(comm, "writing a checkpoint", [&] {
    if (comm.rank() != 0) return;
    CheckpointState c;
    c.identity = checkpoint_identity(config_, s.part.dataset);
    c.ranks = comm.size();
    c.partition_fingerprint = partition;
    c.run = state.run;
    c.epoch = state.epoch;
    c.current = state.result;
    c.bytes_total = state.bytes_total;
    c.raw_total = state.raw_total;
    c.history = s.history;
    const Model& model = *s.model;
    c.params = model.host_params();
    c.buffers.assign(model.buffers().begin(), model.buffers().end());
    c.adam_m = state.adam->first_moment();
    c.adam_v = state.adam->second_moment();
    c.adam_steps = state.adam->steps();
    c.best_params = state.best_params;
    c.best_buffers = state.best_buffers;
    c.finished = s.finished;
    const bool crash =
        s.fault.mode == FaultMode::Checkpoint && s.fault.rank == 0 && s.fault.epoch == state.epoch;
    path = write_checkpoint(config_.checkpoint_dir, c, crash).string();
    prune_checkpoints(config_.checkpoint_dir, config_.keep_checkpoints);
  });
  return path;
}

std::optional<CheckpointState> Trainer::find_resume_point(TrainOutcome& out) {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  std::vector<std::byte> image;
  run_agreed(comm, "checking --checkpoint-dir", [&] {
    if (comm.rank() != 0) return;
    check_checkpoint_dir(config_.checkpoint_dir);
    if (config_.resume_mode() == ResumeMode::Never) return;
    image =
        find_checkpoint(config_, checkpoint_identity(config_, s.part.dataset), out.resumed_from);
  });
  std::vector<std::int64_t> size = {static_cast<std::int64_t>(image.size())};
  comm.all_reduce_max(size);
  if (size[0] == 0) return std::nullopt;
  image.resize(static_cast<std::size_t>(size[0]));
  comm.broadcast(image, 0, TrafficCategory::Setup);
  return run_agreed(comm, "reading the checkpoint", [&] {
    CheckpointState c = checkpoint_from_image(image, "checkpoint from rank 0");
    TESSERA_CHECK(
        c.run >= 0 && c.run < config_.runs && static_cast<int>(c.finished.size()) == c.run,
        InvalidInput, "checkpoint of run ", c.run, " with ", c.finished.size(),
        " finished runs does not fit --runs ", config_.runs);
    return std::optional<CheckpointState>(std::move(c));
  });
}

}  // namespace tessera
