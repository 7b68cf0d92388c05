// SPDX-License-Identifier: Apache-2.0
// The training loss of a set of rows and its gradient w.r.t. the logits, for both tasks of the
// node-property datasets: multi-class (log-softmax + NLL over labelled rows) and multi-label
// (sigmoid + binary cross-entropy over the non-NaN targets). The trainer and the pipeline's last
// stage share it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/csr.h"
#include "core/tensor.h"
#include "partition/graph_part.h"

namespace tessera {

// Returns the loss summed over `rows` (unscaled); d_logits (R, C) gets scale times its
// gradient (0 on other rows). logp is workspace (multi-class). labels (R) for multi-class,
// targets (R, T) for multi-label.
double loss_and_gradient(Tensor& d_logits, Tensor& logp, const Tensor& logits, bool multiclass,
                         std::span<const std::int64_t> labels, const Tensor& targets,
                         std::span<const NodeId> rows, float scale);

// The rows of a part that enter the training loss: its training rows with a label (multi-class;
// every training row for multi-label) and the loss terms they hold (labels, or non-NaN targets).
struct LossRows {
  std::vector<NodeId> rows;  // local ids, increasing
  std::int64_t terms = 0;
};
LossRows loss_rows(const GraphPart& part);

}  // namespace tessera
