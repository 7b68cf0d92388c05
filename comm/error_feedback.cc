// SPDX-License-Identifier: Apache-2.0
// ErrorFeedback (comm/error_feedback.h): gather + residual on the way out, residual = meant -
// decoded after the sender decodes its own message; every step a row kernel, so the residuals
// stay on the device of the rows.
#include "comm/error_feedback.h"

#include <utility>

#include "core/kernels.h"

namespace tessera {

const Tensor& ErrorFeedback::with_residual(int direction, int layer, const Tensor& source,
                                           std::span<const NodeId> rows) {
  std::vector<Tensor>& residuals = residuals_[direction];
  if (static_cast<int>(residuals.size()) <= layer) residuals.resize(layer + 1);
  Tensor& residual = residuals[layer];
  const auto n = static_cast<std::int64_t>(rows.size());
  const Device device = source.device();
  if (residual.rows() != n || residual.cols() != source.cols() || residual.device() != device) {
    residual = Tensor::zeros(n, source.cols(), DType::F32, device);  // first use, or reshaped
  }
  input_.resize(n, source.cols(), device);
  gather_rows(input_, source, rows);
  axpy(input_, 1.0f, residual);
  return input_;
}

Tensor& ErrorFeedback::decoded() {
  decoded_.resize(input_.rows(), input_.cols(), input_.device());
  return decoded_;
}

void ErrorFeedback::update(int direction, int layer) {
  Tensor& residual = residuals_[direction][layer];
  if (residual.empty()) return;
  // What was meant becomes the residual in place (its old memory the next input): meant -
  // decoded, on whichever device the rows live.
  std::swap(residual, input_);
  axpy(residual, -1.0f, decoded_);
}

void ErrorFeedback::reset() {
  residuals_[0].clear();
  residuals_[1].clear();
}

}  // namespace tessera
