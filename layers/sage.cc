// SAGEConv forward/backward with the engine kernels: the neighbour branch P X W in the cheaper
// order (like GCN), the root branch X W_root added by a second GEMM (beta = 1), then the fused
// bias + activation kernel. Backward OVERWRITES d_x and ACCUMULATES d_weight, d_bias and
// d_root_weight.
#include "layers/sage.h"

#include "core/error.h"

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

}  // namespace tessera
