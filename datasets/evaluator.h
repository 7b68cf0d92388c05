// SPDX-License-Identifier: Apache-2.0
// Evaluators with OGB's semantics (ogb/nodeproppred/evaluate.py): accuracy for multi-class
// (unlabelled rows dropped) and mean ROC-AUC over tasks for multi-label (per task, NaN rows
// dropped; tasks without both classes skipped; an error if no task qualifies).
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace tessera {

// Fraction of i with y_pred[i] == y_true[i] among the i with y_true[i] >= 0. Throws
// InvalidArgument on a size mismatch; returns 0 when no row is labelled.
double accuracy(std::span<const std::int64_t> y_true, std::span<const std::int64_t> y_pred);

// The two counts accuracy() divides, so that ranks can sum them before dividing.
struct AccuracyCounts {
  std::int64_t labelled = 0;
  std::int64_t correct = 0;
};
AccuracyCounts accuracy_counts(std::span<const std::int64_t> y_true,
                               std::span<const std::int64_t> y_pred);

// y_true (n, T) in {0, 1} with NaN = missing, y_score (n, T) any scores. Ties get the average
// rank (as scikit-learn's roc_auc_score). Throws InvalidArgument on a shape or dtype mismatch,
// InvalidInput when no task has both classes, a label is not 0/1/NaN, or a labelled score is NaN.
double mean_rocauc(const Tensor& y_true, const Tensor& y_score);

}  // namespace tessera
