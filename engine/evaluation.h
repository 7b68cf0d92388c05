// SPDX-License-Identifier: Apache-2.0
// The train/valid/test metrics of an evaluated epoch over all ranks, with the semantics of
// OGB's evaluators: accuracy for multi-class tasks (correct and labelled counts summed over
// ranks) or the mean ROC-AUC over tasks for multi-label ones (which does not decompose: rank 0
// gathers every rank's rows, computes it and broadcasts the value).
#pragma once

#include "comm/communicator.h"
#include "core/tensor.h"
#include "partition/graph_part.h"

namespace tessera {

struct SplitMetrics {
  double train = 0.0;
  double valid = 0.0;
  double test = 0.0;
  // Mean loss over the validation rows, the training loss's: the NLL of the log-softmax
  // (multi-class) or the mean binary cross-entropy over the tasks (multi-label); 0 without rows.
  double valid_loss = 0.0;
};

// Collective. `logits` (N, C) on the host holds this rank's rows in local order, or is null when
// this rank scores no rows (a pipeline stage before the last).
SplitMetrics evaluate_splits(Communicator& comm, const GraphPart& part, const Tensor* logits);

}  // namespace tessera
