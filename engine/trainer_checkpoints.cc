// SPDX-License-Identifier: Apache-2.0
// The Trainer's checkpoints (engine/checkpoint.h has the file format and the lookup): finding
// the checkpoint to resume from and sending it to every rank, restoring a run from it, and
// writing one (rank 0) with the model, Adam's state, the runner's state and the records so far.
// A checkpoint holds the whole model: a pipeline stage's slice is gathered into it by parameter
// name and taken back out of it the same way, so that any layout resumes any other.
#include <cstdio>
#include <map>

#include "comm/agreement.h"
#include "core/error.h"
#include "engine/checkpoint.h"
#include "engine/outputs.h"
#include "engine/trainer_state.h"

namespace tessera {
namespace {

// The values of a slice in the whole model's order (`index`: where each sits there), on rank 0
// (empty elsewhere); gathered from the ranks that hold a copy. Collective. A copy of `slice`
// where the model is whole (rank 0 holds it all).
std::vector<float> whole_values(Communicator& comm, const ModeRunner& runner,
                                std::span<const float> slice, const std::vector<GlobalId>& index,
                                std::int64_t whole) {
  if (index.empty()) return {slice.begin(), slice.end()};
  std::vector<std::int64_t> any = {static_cast<std::int64_t>(slice.size())};
  comm.all_reduce_max(any);  // --restore-best before its first evaluation: none anywhere
  if (any[0] == 0) return {};
  TESSERA_CHECK(slice.size() == index.size(), Internal, "checkpoint: a slice of ", slice.size(),
                " values indexed by ", index.size());
  const bool mine = runner.holds_model_copy();
  Tensor column(mine ? static_cast<std::int64_t>(slice.size()) : 0, 1);
  if (mine) std::copy(slice.begin(), slice.end(), column.f32());
  const Tensor all =
      gather_by_id(comm, mine ? &column : nullptr,
                   mine ? std::span<const GlobalId>(index) : std::span<const GlobalId>(), whole, 1);
  if (comm.rank() != 0) return {};
  return {all.f32(), all.f32() + all.numel()};
}

// This rank's slice of whole-model values from a checkpoint (all of them where the model is
// whole; the sizes are checked where they are used). InvalidInput when the count is not the
// whole model's.
std::vector<float> slice_values(std::span<const float> whole, const std::vector<GlobalId>& index,
                                std::int64_t expected, const char* what) {
  if (index.empty() || whole.empty()) return {whole.begin(), whole.end()};
  TESSERA_CHECK(static_cast<std::int64_t>(whole.size()) == expected, InvalidInput,
                "checkpoint: ", whole.size(), " ", what, ", the model has ", expected,
                " (other features, classes or layers?)");
  std::vector<float> mine(index.size());
  for (std::size_t i = 0; i < index.size(); ++i)
    mine[i] = whole[static_cast<std::size_t>(index[i])];
  return mine;
}

// Positions of `slice`'s entries among `whole`'s, by name.
std::vector<GlobalId> index_by_name(const std::vector<ParamInfo>& slice,
                                    const std::vector<ParamInfo>& whole) {
  std::map<std::string, const ParamInfo*> by_name;
  for (const ParamInfo& p : whole) by_name[p.name] = &p;
  std::vector<GlobalId> index;
  for (const ParamInfo& p : slice) {
    const auto it = by_name.find(p.name);
    TESSERA_CHECK(it != by_name.end() && it->second->rows == p.rows && it->second->cols == p.cols,
                  Internal, "model slice: ", p.name, " is not a parameter of the whole model");
    for (std::int64_t i = 0; i < p.rows * p.cols; ++i) index.push_back(it->second->offset + i);
  }
  return index;
}

}  // namespace

void index_model_slice(ModelIndex& index, const Model& slice, const ModelConfig& whole) {
  if (index.known) return;
  index.known = true;
  const ModelConfig& c = slice.config();
  if (c.first_layer == 0 && c.num_layers == whole.num_layers) return;  // the whole model
  ModelConfig one = whole;  // parameters only: one slot, never run
  one.slots = 1;
  const Model model(one);
  index.params = index_by_name(slice.param_info(), model.param_info());
  index.buffers = index_by_name(slice.buffer_info(), model.buffer_info());
  index.whole_params = static_cast<std::int64_t>(model.params().size());
  index.whole_buffers = static_cast<std::int64_t>(model.buffers().size());
}

void Trainer::restore_run(RunState& state, const CheckpointState& checkpoint) {
  Impl& s = *impl_;
  run_agreed(*s.comm, "restoring the checkpoint", [&] {
    TESSERA_CHECK(checkpoint.epoch >= 0 && checkpoint.epoch <= config_.epochs &&
                      checkpoint.adam_steps == checkpoint.epoch,
                  InvalidInput, "checkpoint at epoch ", checkpoint.epoch, " with ",
                  checkpoint.adam_steps, " optimizer steps does not fit --epochs ", config_.epochs);
    const ModelIndex& index = s.model_index;
    auto params = [&](const std::vector<float>& whole, const char* what) {
      return slice_values(whole, index.params, index.whole_params, what);
    };
    auto buffers = [&](const std::vector<float>& whole) {
      return slice_values(whole, index.buffers, index.whole_buffers, "buffer values");
    };
    set_model_weights(*s.model, params(checkpoint.params, "parameters"),
                      buffers(checkpoint.buffers), "checkpoint");
    state.adam->restore(checkpoint.adam_steps, params(checkpoint.adam_m, "first moments"),
                        params(checkpoint.adam_v, "second moments"));
    state.epoch = checkpoint.epoch;
    state.result = checkpoint.current;
    state.bytes_total = checkpoint.bytes_total;
    state.raw_total = checkpoint.raw_total;
    state.best_params = params(checkpoint.best_params, "best-epoch parameters");
    state.best_buffers = buffers(checkpoint.best_buffers);
    s.runner->restore_state(checkpoint.runner_state);
  });
  // (A checkpoint of graph mode has no state to rebuild from.)
  if (!checkpoint.runner_state.empty())
    s.runner->after_restore(checkpoint.epoch, state.result.seed);
  const bool pipelined = s.runner->info().mode != "graph" && s.runner->info().mode != "single";
  if (pipelined && checkpoint.runner_state.empty() && checkpoint.epoch > 0 && s.comm->rank() == 0)
    std::fprintf(stderr,
                 "Note: the checkpoint holds no historical buffers (it was written in graph "
                 "mode): the first epoch after it aggregates over zeros where rows are not yet "
                 "computed, as a run's first epoch does\n");
}

std::pair<std::vector<float>, std::vector<float>> Trainer::whole_weights() {
  Impl& s = *impl_;
  const ModelIndex& index = s.model_index;
  std::vector<float> params =
      whole_values(*s.comm, *s.runner, s.model->host_params(), index.params, index.whole_params);
  std::vector<float> buffers =
      whole_values(*s.comm, *s.runner, s.model->buffers(), index.buffers, index.whole_buffers);
  if (s.comm->rank() != 0) return {};
  return {std::move(params), std::move(buffers)};
}

std::string Trainer::save_checkpoint(const RunState& state, std::uint64_t partition) {
  Impl& s = *impl_;
  Communicator& comm = *s.comm;
  // Collective: the whole model, Adam's moments and the runner's state onto rank 0.
  CheckpointState c;
  const Model& model = *s.model;
  const ModelIndex& index = s.model_index;
  auto params = [&](std::span<const float> slice) {
    return whole_values(comm, *s.runner, slice, index.params, index.whole_params);
  };
  auto buffers = [&](std::span<const float> slice) {
    return whole_values(comm, *s.runner, slice, index.buffers, index.whole_buffers);
  };
  if (!index.params.empty() || comm.rank() == 0) {  // a whole model: rank 0's own copy
    c.params = params(model.host_params());
    c.buffers = buffers(model.buffers());
    c.adam_m = params(state.adam->first_moment());
    c.adam_v = params(state.adam->second_moment());
    c.best_params = params(state.best_params);
    c.best_buffers = buffers(state.best_buffers);
  }
  c.runner_state = s.runner->save_state();
  std::string path;
  run_agreed(comm, "writing a checkpoint", [&] {
    if (comm.rank() != 0) return;
    c.identity = checkpoint_identity(config_, s.part.dataset);
    c.ranks = comm.size();
    c.partition_fingerprint = partition;
    c.run = state.run;
    c.epoch = state.epoch;
    c.current = state.result;
    c.bytes_total = state.bytes_total;
    c.raw_total = state.raw_total;
    c.history = s.history;
    c.adam_steps = state.adam->steps();
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
