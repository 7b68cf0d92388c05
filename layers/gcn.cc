// GCNConv forward/backward with the engine kernels: gemm for X W, the Propagator for Â, and the
// fused bias + activation kernels. The order (transform-first or aggregate-first) is chosen per
// call and recorded in the cache so that backward mirrors it.
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

}  // namespace tessera
