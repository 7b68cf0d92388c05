// SPDX-License-Identifier: Apache-2.0
// --parallel hybrid (engine/modes.h): ranks = parts x stages, a pipeline per graph part
// (engine/pipeline_mode.h) with, between the parts at each stage, a halo exchange of the
// stage's historical buffers after every epoch (staleness one epoch) and exact halos in the
// evaluation pass; the stages' gradients are all-reduced over the parts by the Trainer.
#include <memory>
#include <vector>

#include "comm/halo_exchange.h"
#include "core/error.h"
#include "core/kernels.h"
#include "engine/halo_propagator.h"
#include "engine/modes.h"
#include "engine/pipeline_mode.h"

namespace tessera {
namespace {

class HaloPartExchange final : public PartExchange {
 public:
  HaloPartExchange(Communicator& comm, const HaloPlan& plan, std::span<const GlobalId> owned_ids,
                   std::span<const GlobalId> halo_ids, const ExchangeCodecs& codecs)
      : exchange_(comm, plan, owned_ids, halo_ids, codecs) {
    column_ids_.assign(owned_ids.begin(), owned_ids.end());
    column_ids_.insert(column_ids_.end(), halo_ids.begin(), halo_ids.end());
  }

  void reset() override { exchange_.reset_residuals(); }

  void refresh(History& history, const ChunkedOperator& op, int first, int count,
               std::int64_t epoch, std::uint64_t seed, bool restored) override {
    exchange_.reset_times();
    exchange_.set_noise(seed, static_cast<std::uint64_t>(epoch));
    for (int l = first; l < first + count; ++l) {
      History::Layer& h = history.layer(l);
      if (h.inputs.empty()) continue;  // a layer that aggregates nothing (GCNII's dense ones)
      // Boundary rows of this epoch's inputs to the parts that aggregate them ...
      exchange_.start_forward(h.inputs, h.halo_inputs, l);
      exchange_.finish_forward(h.halo_inputs);
      // ... and what this part's rows contribute to the gradients of the other parts' rows:
      // A_halo^T over the gradient history, or what the chunks pushed (pushed layers; kept from
      // the checkpoint after a restore).
      if (!h.backward_used || (h.pushed && restored)) continue;
      Tensor* d_halo = &h.halo_grads;
      if (!h.pushed) {
        d_halo_.resize(op.num_halo(), h.grads.cols(), h.grads.device());
        spmm(d_halo_, op.halo_t().view(), h.grads);
        d_halo = &d_halo_;
      }
      h.remote_grads.zero();
      exchange_.start_backward(*d_halo, l);
      exchange_.finish_backward(h.remote_grads);
      if (h.pushed) h.halo_grads.zero();  // this epoch's pushes are sent
    }
  }

  std::unique_ptr<Propagator> eval_propagator(const Csr& whole, MatrixSymmetry symmetry) override {
    return std::make_unique<HaloPropagator>(whole, symmetry, exchange_, column_ids_);
  }

  ExchangeTimes times() const override { return exchange_.times(); }

 private:
  HaloExchange exchange_;
  std::vector<GlobalId> column_ids_;  // (N + H) owned (chunk order), then halo: the attention path
  Tensor d_halo_;  // (H, F) contributions to the other parts' rows
};

std::unique_ptr<ModeRunner> make_hybrid_runner(const TrainConfig& config, GraphPart& part,
                                               Communicator& comm) {
  ExchangeCodecs codecs;
  codecs.forward = config.forward_codec();
  codecs.backward = config.backward_codec();
  codecs.num_layers = config.num_layers;
  auto exchange = [codecs](Communicator& stage_comm, const HaloPlan& plan,
                           std::span<const GlobalId> owned_ids,
                           std::span<const GlobalId> halo_ids) -> std::unique_ptr<PartExchange> {
    return std::make_unique<HaloPartExchange>(stage_comm, plan, owned_ids, halo_ids, codecs);
  };
  return std::make_unique<PipelineRunner>(config, part, comm, exchange);
}

void validate_hybrid(const TrainConfig& c) {
  TESSERA_CHECK(c.stages >= 1, InvalidArgument,
                "--parallel hybrid needs --stages S (pipeline stages per graph part)");
  validate_pipelined(c);
}

}  // namespace

extern const ModeSpec kHybridParallel;
const ModeSpec kHybridParallel = {
    .mode = ParallelMode::Hybrid,
    .name = "hybrid",
    .help = "ranks = graph parts x --stages: a pipeline per graph part, halos between the parts",
    .validate = validate_hybrid,
    .make = make_hybrid_runner,
};

}  // namespace tessera
