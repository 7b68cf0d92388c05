// SPDX-License-Identifier: Apache-2.0
// SAGEConv forward/backward with the engine kernels: the neighbour branch P X W in the cheaper
// order (like GCN), the root branch X W_root added by a second GEMM (beta = 1), then the fused
// bias + activation kernel; then the layer kind "sage" over the model's flat buffers. Backward
// OVERWRITES d_x and ACCUMULATES d_weight, d_bias and d_root_weight.
#include "layers/sage.h"

#include "core/error.h"
#include "layers/layer_kind.h"

namespace tessera {

namespace {

void check_sage_args(const Tensor& x, const Tensor& weight, const Tensor& root_weight,
                     std::size_t bias_size) {
  check_conv_args("SAGE", x, weight, bias_size);
  check_shape(root_weight, weight.rows(), weight.cols(), "SAGE root_weight");
}

}  // namespace

void sage_forward(Tensor& out, SageCache& cache, const Tensor& x, const Tensor& weight,
                  std::span<const float> bias, const Tensor& root_weight, Activation act,
                  Propagator& propagator, int layer, ConvOrder order) {
  check_sage_args(x, weight, root_weight, bias.size());
  const std::int64_t f_in = weight.rows(), f_out = weight.cols();
  cache.ready = false;
  cache.transform_first = is_transform_first(order, f_in, f_out);
  propagate_linear_forward(out, cache.mixed, cache.transform_first, x, weight, propagator, layer);
  gemm(out, x, false, root_weight, false, 1.0f, 1.0f);  // += X W_root
  if (!bias.empty() || act != Activation::None) bias_act_forward(out, out, bias, act);
  cache.ready = true;
}

void sage_backward(Tensor* d_x, Tensor& d_weight, std::span<float> d_bias, Tensor& d_root_weight,
                   SageCache& cache, const Tensor& d_out, const Tensor& x, const Tensor& out,
                   const Tensor& weight, const Tensor& root_weight, Activation act,
                   Propagator& propagator, int layer) {
  check_sage_args(x, weight, root_weight, d_bias.size());
  const std::int64_t n = x.rows(), f_in = weight.rows(), f_out = weight.cols();
  check_shape(d_out, n, f_out, "sage_backward d_out");
  TESSERA_CHECK(cache.ready, InvalidArgument,
                "sage_backward needs a sage_forward before it (one backward per forward)");
  cache.ready = false;
  check_shape(d_weight, f_in, f_out, "sage_backward d_weight");
  check_shape(d_root_weight, f_in, f_out, "sage_backward d_root_weight");
  const Tensor& d_pre = bias_act_grad(cache.d_pre, d_bias, d_out, out, act);  // (N, F_out)
  gemm(d_root_weight, x, true, d_pre, false, 1.0f, 1.0f);                     // += X^T d_pre
  propagate_linear_backward(d_x, d_weight, cache.mixed, cache.transform_first, d_pre, x, weight,
                            propagator, layer);
  if (d_x) gemm(*d_x, d_pre, false, root_weight, true, 1.0f, 1.0f);  // += d_pre W_root^T
}

namespace {

// A SAGE layer in one slot: weight copies out of the flat buffer, the cache of its last forward.
class SageConv final : public Conv {
 public:
  SageConv(const LayerShape& shape, std::span<const std::int64_t> at)
      : shape_(shape),
        weight_at_(static_cast<std::size_t>(at[0])),
        bias_at_(static_cast<std::size_t>(at[1])),
        root_weight_at_(static_cast<std::size_t>(at[2])) {}

  void forward(Tensor& out, const Tensor& x, std::span<const float> params, Activation act,
               Propagator& propagator) override {
    copy_param(weight_, params.subspan(weight_at_, weight_size()), shape_.f_in, shape_.f_out,
               x.device());
    copy_param(root_weight_, params.subspan(root_weight_at_, weight_size()), shape_.f_in,
               shape_.f_out, x.device());
    sage_forward(out, cache_, x, weight_, params.subspan(bias_at_, bias_size()), root_weight_, act,
                 propagator, shape_.layer);
  }

  void backward(Tensor* d_x, std::span<float> grads, const Tensor& d_out, const Tensor& x,
                const Tensor& out, std::span<const float>, Activation act, Propagator& propagator,
                Tensor& workspace) override {
    const WorkspaceLoan loan(cache_.d_pre, workspace);
    const std::span<float> d_w = grads.subspan(weight_at_, weight_size());
    const std::span<float> d_root = grads.subspan(root_weight_at_, weight_size());
    copy_param(d_weight_, d_w, shape_.f_in, shape_.f_out, x.device());  // gemm accumulates
    copy_param(d_root_weight_, d_root, shape_.f_in, shape_.f_out, x.device());
    sage_backward(d_x, d_weight_, grads.subspan(bias_at_, bias_size()), d_root_weight_, cache_,
                  d_out, x, out, weight_, root_weight_, act, propagator, shape_.layer);
    copy_grad(d_root, d_root_weight_);
    copy_grad(d_w, d_weight_);
  }

  void release() override {
    cache_.mixed = Tensor();
    cache_.d_pre = Tensor();
  }

 private:
  std::size_t weight_size() const { return static_cast<std::size_t>(shape_.f_in * shape_.f_out); }
  std::size_t bias_size() const { return static_cast<std::size_t>(shape_.f_out); }

  LayerShape shape_;
  std::size_t weight_at_, bias_at_, root_weight_at_;
  Tensor weight_, root_weight_;      // (F_in, F_out) copies, refreshed every forward
  Tensor d_weight_, d_root_weight_;  // (F_in, F_out) copies of the gradients during backward
  SageCache cache_;
};

std::vector<ParamDecl> sage_params(const LayerShape& shape) {
  return {{"weight", shape.f_in, shape.f_out, true, ParamInit::Glorot, 0},
          {"bias", 1, shape.f_out, false, ParamInit::Zeros, 0},
          {"root_weight", shape.f_in, shape.f_out, true, ParamInit::Glorot, 1}};
}

std::unique_ptr<Conv> make_sage_conv(const LayerShape& shape, std::span<const std::int64_t> at) {
  return std::make_unique<SageConv>(shape, at);
}

bool sage_reads_input(std::int64_t, std::int64_t) { return true; }  // x W_root's gradient

}  // namespace

extern const LayerKind kSageLayer;
const LayerKind kSageLayer = {
    .name = "sage",
    .help =
        "GraphSAGE as in PyG: mean aggregator plus a root weight, act(mean(X) W + X W_root + b)",
    .op = &kMeanOperator,
    .residual = false,
    .gemms = 2,
    .backward_reads_input = sage_reads_input,
    .halo_widths = propagated_halo_widths,
    .params = sage_params,
    .make = make_sage_conv,
};
const ModelKind ModelKind::Sage{kSageLayer};

}  // namespace tessera
