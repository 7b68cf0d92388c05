// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the graph convolutions.
#include "layers/conv_common.h"

#include <algorithm>

#include "core/error.h"

namespace tessera {

bool is_transform_first(ConvOrder order, std::int64_t f_in, std::int64_t f_out) {
  switch (order) {
    case ConvOrder::TransformFirst: return true;
    case ConvOrder::AggregateFirst: return false;
    case ConvOrder::Auto: break;
  }
  return f_out < f_in;
}

HaloWidths propagated_halo_widths(const LayerShape& shape) {
  const bool transform_first = is_transform_first(ConvOrder::Auto, shape.f_in, shape.f_out);
  const std::int64_t width = transform_first ? shape.f_out : shape.f_in;
  return {width, !shape.first() || transform_first ? width : 0};
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

bool keeps_sums_in_bf16(Tensor& kept, bool aggregates_first, const Propagator& propagator) {
  const bool bf16 = aggregates_first && propagator.operand_dtype() == DType::BF16;
  if (!bf16 && kept.dtype() != DType::F32) kept = Tensor();  // bf16 in an earlier call
  return bf16;
}

void keep_bf16(Tensor& kept, const Tensor& sums) {
  if (kept.dtype() != DType::BF16) kept = Tensor(0, 0, DType::BF16, sums.device());
  kept.resize(sums.rows(), sums.cols(), sums.device());
  to_bf16(kept, sums);
}

const Tensor& bf16_operand(Tensor& kept, const Tensor& x) {
  if (x.dtype() == DType::BF16) return x;  // features stored in bf16
  keep_bf16(kept, x);
  return kept;
}

const Tensor& bias_act_grad(Tensor& d_pre, std::span<float> d_bias, const Tensor& d_out,
                            const Tensor& out, Activation act) {
  if (act == Activation::None) {
    if (!d_bias.empty()) column_sums(d_bias, d_out, /*accumulate=*/true);
    return d_out;
  }
  d_pre.resize(d_out.rows(), d_out.cols(), d_out.device());
  bias_act_backward(d_pre, d_bias, d_out, out, act);
  return d_pre;
}

void propagate_linear_forward(Tensor& out, Tensor& mixed, bool transform_first, const Tensor& x,
                              const Tensor& weight, Propagator& propagator, int layer) {
  const std::int64_t n = x.rows(), f_in = weight.rows(), f_out = weight.cols();
  const Device device = x.device();
  const bool bf16 = keeps_sums_in_bf16(mixed, !transform_first, propagator);
  if (transform_first) {
    mixed.resize(n, f_out, device);  // (N, F_out) = X W
    gemm(mixed, x, false, weight, false);
    out.resize(n, f_out, device);
    propagator.forward(out, mixed, layer);  // (N, F_out) = P (X W)
  } else if (bf16) {
    // X rounded into the kept tensor, which the propagator reads as it is (no workspace of its
    // own); P X in f32 in out's memory (F_in <= F_out in the automatic order), kept rounded to
    // bf16 over the rounded X; (P X) W reads the rounded rows, so that the weight gradient is
    // that of this forward.
    out.resize_within(n, std::max(f_in, f_out), device);
    out.resize_within(n, f_in, device);
    propagator.forward(out, bf16_operand(mixed, x), layer);
    keep_bf16(mixed, out);
    out.resize_within(n, f_out, device);
    gemm(out, mixed, false, weight, false);
  } else {
    mixed.resize(n, f_in, device);
    propagator.forward(mixed, x, layer);  // (N, F_in) = P X
    out.resize(n, f_out, device);         // (N, F_out) = (P X) W
    gemm(out, mixed, false, weight, false);
  }
}

void propagate_linear_backward(Tensor* d_x, Tensor& d_weight, Tensor& mixed, bool transform_first,
                               const Tensor& d_pre, const Tensor& x, const Tensor& weight,
                               Propagator& propagator, int layer) {
  const std::int64_t n = x.rows(), f_in = weight.rows();
  if (transform_first) {
    Tensor& d_xw = mixed;                     // (N, F_out), reused: X W is not needed
    propagator.backward(d_xw, d_pre, layer);  // d(X W) = P^T d_pre
    gemm(d_weight, x, true, d_xw, false, 1.0f, 1.0f);
    if (d_x) {
      d_x->resize(n, f_in, x.device());  // (N, F_in) = d(X W) W^T
      gemm(*d_x, d_xw, false, weight, true);
    }
  } else {
    gemm(d_weight, mixed, true, d_pre, false, 1.0f, 1.0f);  // += (P X)^T d_pre (f32 or bf16)
    if (d_x) {
      // (N, F_in) = d_pre W^T in P X's memory, read above: in bf16 when P X was, rounded as the
      // propagator would round it (which reads bf16 rows as they are).
      Tensor& d_px = mixed;
      gemm(d_px, d_pre, false, weight, true);
      d_x->resize(n, f_in, x.device());
      propagator.backward(*d_x, d_px, layer);  // (N, F_in) = P^T d(P X)
    }
  }
}

void copy_param(Tensor& dst, std::span<const float> src, std::int64_t rows, std::int64_t cols,
                Device device) {
  dst.resize(rows, cols, device);
  backend(device).copy(dst.raw(), src.data(), src.size_bytes());
}

void copy_grad(std::span<float> dst, const Tensor& src) {
  backend(src.device()).copy(dst.data(), src.raw(), src.bytes());
}

}  // namespace tessera
