// What the graph convolutions share: the choice of aggregation order (ConvOrder), the argument
// checks of a (weight, bias) pair and the gradient through the fused bias + activation.
#pragma once

#include <cstdint>
#include <span>

#include "engine/core/kernels.h"
#include "engine/core/tensor.h"

namespace tessera {

// Which of Â (X W) and (Â X) W a layer computes. Both give the same result up to float rounding;
// the width that goes through the propagator sets the SpMM work and the halo traffic, so Auto
// transforms first exactly when F_out < F_in. The others force an order (tests, benchmarks).
enum class ConvOrder { Auto, TransformFirst, AggregateFirst };
bool is_transform_first(ConvOrder order, std::int64_t f_in, std::int64_t f_out);

// Throws InvalidArgument unless weight is (x.cols(), F_out) and bias has 0 or F_out entries;
// `layer_name` ("GCN", "SAGE") starts the message.
void check_conv_args(const char* layer_name, const Tensor& x, const Tensor& weight,
                     std::size_t bias_size);

// Gradient before bias + activation: d_pre = d_out * act'(out), d_bias += column sums.
// Returns d_out itself when there is no activation (no copy), else d_pre (resized).
const Tensor& bias_act_grad(Tensor& d_pre, std::span<float> d_bias, const Tensor& d_out,
                            const Tensor& out, Activation act);

}  // namespace tessera
