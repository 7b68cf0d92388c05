// SPDX-License-Identifier: Apache-2.0
// Tests of the OGB-semantics evaluators: hand-made cases with known answers (unlabelled rows,
// ties, single-class and NaN handling, errors) and a cross-check of ROC-AUC against a naive
// O(n^2) pair count on random data with many ties.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "datasets/evaluator.h"
#include "core/error.h"

namespace tessera {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// (n, T) f32 tensor from row-major values.
Tensor matrix(std::int64_t rows, std::int64_t cols, const std::vector<float>& values) {
  Tensor t(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) t.f32()[i] = values[i];
  return t;
}

template <class F>
ErrorCategory category_of(F&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.category();
  }
  ADD_FAILURE() << "expected a tessera::Error";
  return ErrorCategory::Internal;
}

TEST(Accuracy, DropsUnlabelledRows) {
  std::vector<std::int64_t> y_true = {0, 1, 2, -1, 1};
  std::vector<std::int64_t> y_pred = {0, 2, 2, 1, 1};
  EXPECT_DOUBLE_EQ(accuracy(y_true, y_pred), 3.0 / 4.0);
}

TEST(Accuracy, NoLabelledRowGivesZero) {
  std::vector<std::int64_t> y_true = {-1, -1};
  std::vector<std::int64_t> y_pred = {0, 1};
  EXPECT_EQ(accuracy(y_true, y_pred), 0.0);
  EXPECT_EQ(accuracy({}, {}), 0.0);
}

TEST(Accuracy, SizeMismatchIsInvalidArgument) {
  std::vector<std::int64_t> y_true = {0, 1, 2};
  std::vector<std::int64_t> y_pred = {0, 1};
  EXPECT_EQ(category_of([&] { accuracy(y_true, y_pred); }), ErrorCategory::InvalidArgument);
}

TEST(RocAuc, ScikitLearnDocumentationExample) {
  // roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
  EXPECT_DOUBLE_EQ(mean_rocauc(matrix(4, 1, {0, 0, 1, 1}), matrix(4, 1, {0.1f, 0.4f, 0.35f, 0.8f})),
                   0.75);
}

TEST(RocAuc, TiesCountOneHalf) {
  EXPECT_DOUBLE_EQ(mean_rocauc(matrix(4, 1, {0, 1, 0, 1}), matrix(4, 1, {0.5f, 0.5f, 0.5f, 0.5f})),
                   0.5);
  // Pairs (pos, neg): (.5,.1) 1, (.5,.5) 1/2, (.9,.1) 1, (.9,.5) 1 -> 3.5 / 4.
  EXPECT_DOUBLE_EQ(mean_rocauc(matrix(4, 1, {0, 0, 1, 1}), matrix(4, 1, {0.1f, 0.5f, 0.5f, 0.9f})),
                   0.875);
  // Perfectly inverted order.
  EXPECT_DOUBLE_EQ(mean_rocauc(matrix(3, 1, {1, 0, 0}), matrix(3, 1, {-3.0f, 2.0f, 7.0f})), 0.0);
}

TEST(RocAuc, SkipsSingleClassTasksAndDropsNaN) {
  // Task 0: AUC 1. Task 1: only positives -> skipped. Task 2: rows 0 and 3 NaN; remaining
  // labels (1, 0) with scores (0.2, 0.9) -> AUC 0. Mean over tasks 0 and 2 = 0.5.
  Tensor y_true = matrix(4, 3,
                         {0, 1, kNaN,  //
                          0, 1, 1,     //
                          1, 1, 0,     //
                          1, 1, kNaN});
  Tensor y_score = matrix(4, 3,
                          {0.1f, 0.3f, 0.0f,  //
                           0.2f, 0.1f, 0.2f,  //
                           0.8f, 0.9f, 0.9f,  //
                           0.9f, 0.5f, 5.0f});
  EXPECT_DOUBLE_EQ(mean_rocauc(y_true, y_score), 0.5);
}

TEST(RocAuc, NaNRowsCanLeaveATaskWithOneClass) {
  // Task 1 keeps only a negative after dropping NaN, so only task 0 counts: its negative
  // (0.5) beats one positive (0.1) and loses to the other (0.9) -> 0.5.
  Tensor y_true = matrix(3, 2, {0, kNaN, 1, 0, 1, kNaN});
  Tensor y_score = matrix(3, 2, {0.5f, 0.0f, 0.1f, 0.0f, 0.9f, 0.0f});
  EXPECT_DOUBLE_EQ(mean_rocauc(y_true, y_score), 0.5);
}

TEST(RocAuc, NoQualifyingTaskIsAnError) {
  Tensor y_true = matrix(3, 2, {1, kNaN, 1, 0, 1, kNaN});
  Tensor y_score = matrix(3, 2, {0, 0, 0, 0, 0, 0});
  EXPECT_EQ(category_of([&] { mean_rocauc(y_true, y_score); }), ErrorCategory::InvalidInput);
  EXPECT_EQ(category_of([&] { mean_rocauc(Tensor(0, 3), Tensor(0, 3)); }),
            ErrorCategory::InvalidInput);
}

TEST(RocAuc, BadInputsAreRefused) {
  EXPECT_EQ(category_of([&] {
              mean_rocauc(matrix(2, 1, {0, 1}), matrix(1, 2, {0, 1}));
            }),
            ErrorCategory::InvalidArgument);
  EXPECT_EQ(category_of([&] {
              mean_rocauc(matrix(2, 1, {0, 2}), matrix(2, 1, {0, 1}));
            }),
            ErrorCategory::InvalidInput);
  EXPECT_EQ(category_of([&] {
              mean_rocauc(matrix(2, 1, {0, 1}), matrix(2, 1, {0, kNaN}));
            }),
            ErrorCategory::InvalidInput);
}

// Naive reference: over all (positive, negative) pairs, 1 if the positive scores higher,
// 1/2 on a tie; mean over the tasks with both classes.
double naive_mean_rocauc(const Tensor& y_true, const Tensor& y_score) {
  const std::int64_t n = y_true.rows(), num_tasks = y_true.cols();
  double sum = 0;
  int counted = 0;
  for (std::int64_t t = 0; t < num_tasks; ++t) {
    double wins = 0;
    std::int64_t pairs = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (y_true.row<float>(i)[t] != 1.0f) continue;
      for (std::int64_t j = 0; j < n; ++j) {
        if (y_true.row<float>(j)[t] != 0.0f) continue;
        float si = y_score.row<float>(i)[t], sj = y_score.row<float>(j)[t];
        wins += si > sj ? 1.0 : si == sj ? 0.5 : 0.0;
        ++pairs;
      }
    }
    if (pairs == 0) continue;
    sum += wins / static_cast<double>(pairs);
    ++counted;
  }
  return sum / counted;
}

TEST(RocAuc, MatchesNaivePairCountOnRandomData) {
  std::mt19937_64 gen(12345);
  for (int trial = 0; trial < 10; ++trial) {
    const std::int64_t n = 50 + 37 * trial, num_tasks = 1 + trial % 6;
    Tensor y_true(n, num_tasks), y_score(n, num_tasks);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    const float positive_rate = 0.15f + 0.08f * trial;
    for (std::int64_t i = 0; i < n * num_tasks; ++i) {
      float r = unit(gen);
      y_true.f32()[i] = r < 0.1f ? kNaN : (unit(gen) < positive_rate ? 1.0f : 0.0f);
      // Coarse scores (11 levels) so that ties are frequent.
      y_score.f32()[i] = std::round(unit(gen) * 10.0f) - 3.0f;
    }
    const double expected = naive_mean_rocauc(y_true, y_score);
    EXPECT_NEAR(mean_rocauc(y_true, y_score), expected, 1e-12) << "trial " << trial;
  }
}

}  // namespace
}  // namespace tessera
