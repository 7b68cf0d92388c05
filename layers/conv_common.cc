// Shared pieces of the graph convolutions.
#include "layers/conv_common.h"

#include "engine/core/error.h"

namespace tessera {

bool is_transform_first(ConvOrder order, std::int64_t f_in, std::int64_t f_out) {
  switch (order) {
    case ConvOrder::TransformFirst: return true;
    case ConvOrder::AggregateFirst: return false;
    case ConvOrder::Auto: break;
  }
  return f_out < f_in;
}

void check_conv_args(const char* layer_name, const Tensor& x, const Tensor& weight,
                     std::size_t bias_size) {
  TESSERA_CHECK(weight.rows() == x.cols(), InvalidArgument, layer_name, " weight: expected (",
                x.cols(), ", F_out) to match x ", x.shape_string(), ", got ",
                weight.shape_string());
  TESSERA_CHECK(bias_size == 0 || static_cast<std::int64_t>(bias_size) == weight.cols(),
                InvalidArgument, layer_name, " bias: expected ", weight.cols(), " entries, got ",
                bias_size);
}

const Tensor& bias_act_grad(Tensor& d_pre, std::span<float> d_bias, const Tensor& d_out,
                            const Tensor& out, Activation act) {
  if (act == Activation::None) {
    if (!d_bias.empty()) column_sums(d_bias, d_out, /*accumulate=*/true);
    return d_out;
  }
  d_pre.resize(d_out.rows(), d_out.cols());
  bias_act_backward(d_pre, d_bias, d_out, out, act);
  return d_pre;
}

}  // namespace tessera
