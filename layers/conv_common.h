// SPDX-License-Identifier: Apache-2.0
// What the graph convolutions share: the choice of aggregation order (ConvOrder), the argument
// checks of a (weight, bias) pair, the propagated linear map P·X·W in either order with its
// backward, the gradient through the fused bias + activation, and the copies between a model's
// flat parameter buffer and the (F_in, F_out) tensors the kernels take.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "core/kernels.h"
#include "core/tensor.h"
#include "layers/layer_kind.h"
#include "layers/propagator.h"

namespace tessera {

// Which of Â (X W) and (Â X) W a layer computes. Both give the same result up to float rounding;
// the width that goes through the propagator sets the SpMM work and the halo traffic, so Auto
// transforms first exactly when F_out < F_in. The others force an order (tests, benchmarks).
enum class ConvOrder { Auto, TransformFirst, AggregateFirst };
bool is_transform_first(ConvOrder order, std::int64_t f_in, std::int64_t f_out);

// The halo widths of a propagated linear map in the automatic order (GCN, residual GCN, SAGE):
// the width through the propagator (F_out when it transforms first, else F_in) both ways, except
// that the first layer sends no gradient back unless it transforms first (the features get
// none; aggregating first, d_W needs only the aggregated input it kept).
HaloWidths propagated_halo_widths(const LayerShape& shape);

// Throws InvalidArgument unless weight is (x.cols(), F_out) and bias has 0 or F_out entries;
// `layer_name` ("GCN", "SAGE") starts the message.
void check_conv_args(const char* layer_name, const Tensor& x, const Tensor& weight,
                     std::size_t bias_size);

// Gradient before bias + activation: d_pre = d_out * act'(out), d_bias += column sums.
// Returns d_out itself when there is no activation (no copy), else d_pre (resized).
const Tensor& bias_act_grad(Tensor& d_pre, std::span<float> d_bias, const Tensor& d_out,
                            const Tensor& out, Activation act);

// Whether an aggregate-first layer keeps its sums P X in `kept` in bf16 this call (half the
// bytes from its forward to its backward): when the propagator aggregates bf16 rows
// (--aggregate-dtype bf16), whose sums are then rounded once more; the weight gradient reads
// them widened exactly, in f32. When not, a bf16 `kept` of an earlier call is emptied, to be
// made again in f32.
bool keeps_sums_in_bf16(Tensor& kept, bool aggregates_first, const Propagator& propagator);
// kept (N, F) = sums rounded to bf16 (kept becomes a bf16 tensor of that shape).
void keep_bf16(Tensor& kept, const Tensor& sums);
// The rows an aggregate-first layer that keeps its sums in bf16 aggregates: x itself when it is
// bf16, else x rounded into `kept` (as keep_bf16), which the sums then overwrite. The propagator
// reads bf16 rows as they are, so it rounds nothing into a workspace of its own for the layer.
const Tensor& bf16_operand(Tensor& kept, const Tensor& x);

// out (N, F_out) = P x W, x (N, F_in), weight (F_in, F_out): transform-first computes
// mixed = X W (N, F_out) then P mixed; aggregate-first mixed = P X (N, F_in) then mixed W.
// `mixed` is what the backward needs (aggregate-first: f32, or bf16 when keeps_sums_in_bf16, and
// then mixed W reads the rounded rows) or scratch (transform-first).
void propagate_linear_forward(Tensor& out, Tensor& mixed, bool transform_first, const Tensor& x,
                              const Tensor& weight, Propagator& propagator, int layer);
// Backward of propagate_linear_forward given d_pre (N, F_out) = d(P x W): d_weight (F_in, F_out)
// ACCUMULATED; d_x (N, F_in) OVERWRITTEN, or skipped when null (then, aggregate-first, no
// propagator backward runs at all). `mixed` is the forward's and is reused as workspace (bf16
// P X holds d(P X) rounded to bf16, which a bf16 propagator would read anyway).
void propagate_linear_backward(Tensor* d_x, Tensor& d_weight, Tensor& mixed, bool transform_first,
                               const Tensor& d_pre, const Tensor& x, const Tensor& weight,
                               Propagator& propagator, int layer);

// Lends a conv the model's shared backward workspace for one call: swaps it into the conv's own
// slot and back when it goes out of scope (one backward runs at a time).
class WorkspaceLoan {
 public:
  WorkspaceLoan(Tensor& slot, Tensor& lent) : slot_(slot), lent_(lent) { std::swap(slot_, lent_); }
  ~WorkspaceLoan() { std::swap(slot_, lent_); }
  WorkspaceLoan(const WorkspaceLoan&) = delete;
  WorkspaceLoan& operator=(const WorkspaceLoan&) = delete;

 private:
  Tensor& slot_;
  Tensor& lent_;
};

// dst (rows, cols) on `device` = src, parameter values on the same device (a weight out of the
// flat buffer, for the kernels).
void copy_param(Tensor& dst, std::span<const float> src, std::int64_t rows, std::int64_t cols,
                Device device);
// dst = src, parameter gradients on src's device (back into the flat buffer).
void copy_grad(std::span<float> dst, const Tensor& src);

}  // namespace tessera
