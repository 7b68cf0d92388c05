// SPDX-License-Identifier: Apache-2.0
// OGB-semantics evaluators: accuracy over labelled rows, and mean ROC-AUC over the tasks that
// have both classes. ROC-AUC is the Mann-Whitney statistic with ties counted one half, which
// is what scikit-learn's roc_auc_score gives (average ranks); it is computed exactly in integers.
#include "datasets/evaluator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <vector>

#include "core/error.h"

namespace tessera {
namespace {

// ROC-AUC of one task (column `task` of (n, T) arrays); nullopt when the task lacks a positive
// or a negative label among its non-NaN rows.
std::optional<double> task_rocauc(const float* y_true, const float* y_score, std::int64_t n,
                                  std::int64_t num_tasks, std::int64_t task) {
  std::vector<std::pair<float, bool>> rows;  // (score, positive) of labelled rows
  rows.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    float label = y_true[i * num_tasks + task];
    if (std::isnan(label)) continue;
    float score = y_score[i * num_tasks + task];
    TESSERA_CHECK(label == 0.0f || label == 1.0f, InvalidInput, "mean_rocauc: y_true[", i, ", ",
                  task, "] = ", label, ", expected 0, 1 or NaN");
    TESSERA_CHECK(!std::isnan(score), InvalidInput, "mean_rocauc: y_score[", i, ", ", task,
                  "] is NaN for a labelled row");
    rows.emplace_back(score, label == 1.0f);
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Pairs (positive, negative) with the positive scored higher count 2, ties count 1.
  unsigned __int128 twice_wins = 0;
  std::uint64_t negatives_below = 0, positives = 0, negatives = 0;
  for (std::size_t begin = 0; begin < rows.size();) {
    std::size_t end = begin;
    std::uint64_t pos = 0, neg = 0;
    while (end < rows.size() && rows[end].first == rows[begin].first) {
      (rows[end].second ? pos : neg) += 1;
      ++end;
    }
    twice_wins += static_cast<unsigned __int128>(pos) * (2 * negatives_below + neg);
    negatives_below += neg;
    positives += pos;
    negatives += neg;
    begin = end;
  }
  if (positives == 0 || negatives == 0) return std::nullopt;
  long double pairs = static_cast<long double>(positives) * static_cast<long double>(negatives);
  return static_cast<double>(static_cast<long double>(twice_wins) / (2 * pairs));
}

}  // namespace

AccuracyCounts accuracy_counts(std::span<const std::int64_t> y_true,
                               std::span<const std::int64_t> y_pred) {
  TESSERA_CHECK(y_true.size() == y_pred.size(), InvalidArgument, "accuracy: y_true has ",
                y_true.size(), " rows, y_pred has ", y_pred.size());
  std::int64_t labelled = 0, correct = 0;
  const std::int64_t n = static_cast<std::int64_t>(y_true.size());
#pragma omp parallel for schedule(static) reduction(+ : labelled, correct)
  for (std::int64_t i = 0; i < n; ++i) {
    if (y_true[i] < 0) continue;
    ++labelled;
    correct += y_pred[i] == y_true[i];
  }
  return {labelled, correct};
}

double accuracy(std::span<const std::int64_t> y_true, std::span<const std::int64_t> y_pred) {
  const AccuracyCounts c = accuracy_counts(y_true, y_pred);
  return c.labelled == 0 ? 0.0 : static_cast<double>(c.correct) / static_cast<double>(c.labelled);
}

double mean_rocauc(const Tensor& y_true, const Tensor& y_score) {
  TESSERA_CHECK(y_true.dtype() == DType::F32 && y_score.dtype() == DType::F32, InvalidArgument,
                "mean_rocauc: expected f32 tensors, got ", to_string(y_true.dtype()), " and ",
                to_string(y_score.dtype()));
  TESSERA_CHECK(y_true.device().kind == DeviceKind::Cpu && y_score.device().kind == DeviceKind::Cpu,
                InvalidArgument, "mean_rocauc: expected CPU tensors");
  check_shape(y_score, y_true.rows(), y_true.cols(), "mean_rocauc: y_score");
  const std::int64_t n = y_true.rows(), num_tasks = y_true.cols();
  std::vector<std::optional<double>> per_task(static_cast<std::size_t>(num_tasks));
  // Errors inside the parallel region are carried out and rethrown after it.
  std::vector<std::optional<Error>> failure(static_cast<std::size_t>(num_tasks));
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t t = 0; t < num_tasks; ++t) {
    try {
      per_task[t] = task_rocauc(y_true.f32(), y_score.f32(), n, num_tasks, t);
    } catch (const Error& error) {
      failure[t].emplace(error);
    }
  }
  double sum = 0;
  std::int64_t counted = 0;
  for (std::int64_t t = 0; t < num_tasks; ++t) {
    if (failure[t]) throw *failure[t];
    if (per_task[t]) {
      sum += *per_task[t];
      ++counted;
    }
  }
  TESSERA_CHECK(counted > 0, InvalidInput,
                "mean_rocauc: no task has both a positive and a "
                "negative label among its ",
                n, " rows (", num_tasks, " tasks), ROC-AUC undefined");
  return sum / static_cast<double>(counted);
}

}  // namespace tessera
