// SPDX-License-Identifier: Apache-2.0
// GCNConv forward/backward with the engine kernels: gemm for X W, the Propagator for Â, and the
// fused bias + activation kernels. The order (transform-first or aggregate-first) is chosen per
// call and recorded in the cache so that backward mirrors it. Then the layer kind "gcn": its
// parameters and its Conv over the model's flat buffers.
// Backward OVERWRITES d_x and ACCUMULATES d_weight and d_bias.
#include "layers/gcn.h"

#include "core/error.h"

namespace tessera {

namespace {

void check_gcn_args(const Tensor& x, const Tensor& weight, std::size_t bias_size) {
  check_conv_args("GCN", x, weight, bias_size);
}

}  // namespace

void gcn_forward(Tensor& out, GcnCache& cache, const Tensor& x, const Tensor& weight,
                 std::span<const float> bias, Activation act, Propagator& propagator, int layer,
                 ConvOrder order) {
  check_gcn_args(x, weight, bias.size());
  const std::int64_t f_in = weight.rows(), f_out = weight.cols();
  cache.ready = false;
  cache.transform_first = is_transform_first(order, f_in, f_out);
  propagate_linear_forward(out, cache.mixed, cache.transform_first, x, weight, propagator, layer);
  if (!bias.empty() || act != Activation::None) bias_act_forward(out, out, bias, act);
  cache.ready = true;
}

void gcn_backward(Tensor* d_x, Tensor& d_weight, std::span<float> d_bias, GcnCache& cache,
                  const Tensor& d_out, const Tensor& x, const Tensor& out, const Tensor& weight,
                  Activation act, Propagator& propagator, int layer) {
  check_gcn_args(x, weight, d_bias.size());
  const std::int64_t n = x.rows(), f_in = weight.rows(), f_out = weight.cols();
  check_shape(d_out, n, f_out, "gcn_backward d_out");
  TESSERA_CHECK(cache.ready, InvalidArgument,
                "gcn_backward needs a gcn_forward before it (one backward per forward)");
  cache.ready = false;
  check_shape(d_weight, f_in, f_out, "gcn_backward d_weight");
  const Tensor& d_pre = bias_act_grad(cache.d_pre, d_bias, d_out, out, act);  // (N, F_out)
  propagate_linear_backward(d_x, d_weight, cache.mixed, cache.transform_first, d_pre, x, weight,
                            propagator, layer);
}

namespace {

// A GCN layer in one slot: weight copies out of the flat buffer, the cache of its last forward.
class GcnConv final : public Conv {
 public:
  GcnConv(const LayerShape& shape, std::span<const std::int64_t> at)
      : shape_(shape),
        weight_at_(static_cast<std::size_t>(at[0])),
        bias_at_(static_cast<std::size_t>(at[1])) {}

  void forward(Tensor& out, const Tensor& x, std::span<const float> params, Activation act,
               Propagator& propagator) override {
    copy_param(weight_, params.subspan(weight_at_, weight_size()), shape_.f_in, shape_.f_out,
               x.device());
    gcn_forward(out, cache_, x, weight_, params.subspan(bias_at_, bias_size()), act, propagator,
                shape_.layer);
  }

  void backward(Tensor* d_x, std::span<float> grads, const Tensor& d_out, const Tensor& x,
                const Tensor& out, std::span<const float>, Activation act, Propagator& propagator,
                Tensor& workspace) override {
    const WorkspaceLoan loan(cache_.d_pre, workspace);
    const std::span<float> d_w = grads.subspan(weight_at_, weight_size());
    copy_param(d_weight_, d_w, shape_.f_in, shape_.f_out, x.device());  // gemm accumulates
    gcn_backward(d_x, d_weight_, grads.subspan(bias_at_, bias_size()), cache_, d_out, x, out,
                 weight_, act, propagator, shape_.layer);
    copy_grad(d_w, d_weight_);
  }

  // Aggregate-first: the backward needs x for its shape only, which P x (kept) shares.
  const Tensor* input_stand_in() const override {
    return cache_.transform_first ? nullptr : &cache_.mixed;
  }

  void release() override {
    cache_.mixed = Tensor();
    cache_.d_pre = Tensor();
  }

 private:
  std::size_t weight_size() const { return static_cast<std::size_t>(shape_.f_in * shape_.f_out); }
  std::size_t bias_size() const { return static_cast<std::size_t>(shape_.f_out); }

  LayerShape shape_;
  std::size_t weight_at_, bias_at_;
  Tensor weight_;    // (F_in, F_out) copy of the parameters, refreshed every forward
  Tensor d_weight_;  // (F_in, F_out) copy of the gradients during backward
  GcnCache cache_;
};

}  // namespace

std::vector<ParamDecl> gcn_params(const LayerShape& shape) {
  return {{"weight", shape.f_in, shape.f_out, true, ParamInit::Glorot, 0},
          {"bias", 1, shape.f_out, false, ParamInit::Zeros, 0}};
}

std::unique_ptr<Conv> make_gcn_conv(const LayerShape& shape, std::span<const std::int64_t> at) {
  return std::make_unique<GcnConv>(shape, at);
}

bool gcn_reads_input(std::int64_t f_in, std::int64_t f_out) {
  return is_transform_first(ConvOrder::Auto, f_in, f_out);
}

extern const LayerKind kGcnLayer;
const LayerKind kGcnLayer = {
    .name = "gcn",
    .help = "GCN (Kipf & Welling): act(Â X W + b), Â = D^-1/2 (A + I) D^-1/2",
    .op = &kGcnOperator,
    .residual = false,
    .gemms = 1,
    .backward_reads_input = gcn_reads_input,
    .halo_widths = propagated_halo_widths,
    .params = gcn_params,
    .make = make_gcn_conv,
};
const ModelKind ModelKind::Gcn{kGcnLayer};

}  // namespace tessera
