// SPDX-License-Identifier: Apache-2.0
// ErrorFeedback (comm/error_feedback.h): gather + residual on the way out, residual = meant -
// decoded after the sender decodes its own message.
#include "comm/error_feedback.h"

#include <algorithm>

#include "core/kernels.h"

namespace tessera {

const Tensor& ErrorFeedback::with_residual(int direction, int layer, const Tensor& source,
                                           std::span<const NodeId> rows) {
  std::vector<Tensor>& residuals = residuals_[direction];
  if (static_cast<int>(residuals.size()) <= layer) residuals.resize(layer + 1);
  Tensor& residual = residuals[layer];
  const auto n = static_cast<std::int64_t>(rows.size());
  if (residual.rows() != n || residual.cols() != source.cols()) {
    residual = Tensor::zeros(n, source.cols());  // first use, or the width changed
  }
  input_.resize(n, source.cols());
  gather_rows(input_, source, rows);
  axpy(input_, 1.0f, residual);
  return input_;
}

Tensor& ErrorFeedback::decoded() {
  decoded_.resize(input_.rows(), input_.cols());
  return decoded_;
}

void ErrorFeedback::update(int direction, int layer) {
  Tensor& residual = residuals_[direction][layer];
  if (residual.empty()) return;
  std::copy_n(input_.f32(), input_.numel(), residual.f32());
  axpy(residual, -1.0f, decoded_);
}

void ErrorFeedback::reset() {
  residuals_[0].clear();
  residuals_[1].clear();
}

}  // namespace tessera
