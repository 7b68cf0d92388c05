// SPDX-License-Identifier: Apache-2.0
// Multi-class and multi-label training losses over the engine kernels.
#include "engine/loss.h"

#include <cmath>

#include "core/kernels.h"

namespace tessera {

double loss_and_gradient(Tensor& d_logits, Tensor& logp, const Tensor& logits, bool multiclass,
                         std::span<const std::int64_t> labels, const Tensor& targets,
                         std::span<const NodeId> rows, float scale) {
  d_logits.resize(logits.rows(), logits.cols(), logits.device());
  if (multiclass) {
    logp.resize(logits.rows(), logits.cols(), logits.device());
    log_softmax_forward(logp, logits);
    const double sum = nll_loss_sum(logp, labels, rows);
    log_softmax_nll_backward(d_logits, logp, labels, rows, scale);
    return sum;
  }
  std::int64_t terms = 0;
  const double sum = sigmoid_bce_loss_sum(logits, targets, rows, &terms);
  sigmoid_bce_backward(d_logits, logits, targets, rows, scale);
  return sum;
}

LossRows loss_rows(const GraphPart& part) {
  LossRows out;
  if (part.dataset.task == TaskType::MultiClass) {
    for (NodeId v : part.train_rows)
      if (part.labels[v] >= 0) out.rows.push_back(v);
    out.terms = static_cast<std::int64_t>(out.rows.size());
    return out;
  }
  out.rows = part.train_rows;
  const std::int64_t t = part.targets.cols();
  for (NodeId v : part.train_rows)
    for (std::int64_t j = 0; j < t; ++j)
      if (!std::isnan(part.targets.row<float>(v)[j])) ++out.terms;
  return out;
}

}  // namespace tessera
