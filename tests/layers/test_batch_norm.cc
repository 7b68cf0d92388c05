// SPDX-License-Identifier: Apache-2.0
// BatchNorm1d over nodes: training forward against batch statistics computed naively, running
// statistics (momentum 0.1, unbiased variance), eval with running statistics, gradients of x,
// gamma and beta against central finite differences, and two "ranks" joined by a fake
// all-reduce giving the same result as one.
#include "layers/batch_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/layers/layer_test_util.h"

namespace tessera {
namespace {

using test::dot;
using test::expect_close;
using test::expect_gradient;
using test::random_tensor;
using test::span_of;

constexpr std::int64_t kRows = 9;
constexpr std::int64_t kCols = 5;

struct Inputs {
  Tensor x = random_tensor(kRows, kCols, 1, -2.0f, 3.0f);  // (N, F), mean away from 0
  std::vector<float> gamma = positive(2), beta = test::random_vector(kCols, 3);
  std::vector<float> running_mean = test::random_vector(kCols, 4), running_var = positive(5);
  Tensor r = random_tensor(kRows, kCols, 6);  // (N, F) d_y of loss = sum(y * r)

  static std::vector<float> positive(std::uint32_t seed) {
    std::vector<float> v = test::random_vector(kCols, seed);
    for (float& x : v) x = 1.0f + 0.5f * x;  // in [0.5, 1.5]
    return v;
  }
};

// Column mean and biased variance of x, in double.
void column_stats(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  const auto f = static_cast<std::size_t>(x.cols());
  mean.assign(f, 0.0);
  var.assign(f, 0.0);
  for (std::int64_t i = 0; i < x.rows(); ++i)
    for (std::size_t j = 0; j < f; ++j) mean[j] += x.row<float>(i)[j];
  for (double& m : mean) m /= static_cast<double>(x.rows());
  for (std::int64_t i = 0; i < x.rows(); ++i)
    for (std::size_t j = 0; j < f; ++j) {
      const double d = x.row<float>(i)[j] - mean[j];
      var[j] += d * d;
    }
  for (double& v : var) v /= static_cast<double>(x.rows());
}

Tensor affine_reference(const Tensor& x, const std::vector<double>& mean,
                        const std::vector<double>& var, const Inputs& s) {
  Tensor y(x.rows(), x.cols());
  for (std::int64_t i = 0; i < x.rows(); ++i)
    for (std::size_t j = 0; j < mean.size(); ++j)
      y.row<float>(i)[j] = static_cast<float>(
          s.gamma[j] * (x.row<float>(i)[j] - mean[j]) / std::sqrt(var[j] + kBatchNormEps) +
          s.beta[j]);
  return y;
}

TEST(BatchNorm, TrainingUsesBatchStatisticsAndUpdatesRunningOnes) {
  Inputs s;
  const std::vector<float> running_mean0 = s.running_mean, running_var0 = s.running_var;
  Tensor y;
  BatchNormCache cache;
  batch_norm1d_forward(y, cache, s.running_mean, s.running_var, s.x, s.gamma, s.beta, true,
                       kRows, {});
  std::vector<double> mean, var;
  column_stats(s.x, mean, var);
  // float32 arithmetic on values of magnitude <= ~5: rounding below 1e-5.
  expect_close(span_of(y), span_of(affine_reference(s.x, mean, var, s)), 1e-5, "y");

  std::vector<float> expected_mean(kCols), expected_var(kCols);
  for (std::size_t j = 0; j < kCols; ++j) {
    expected_mean[j] = static_cast<float>(0.9 * running_mean0[j] + 0.1 * mean[j]);
    const double unbiased = var[j] * kRows / (kRows - 1.0);
    expected_var[j] = static_cast<float>(0.9 * running_var0[j] + 0.1 * unbiased);
  }
  // Computed in double and rounded once: float32 rounding only.
  expect_close(s.running_mean, expected_mean, 1e-6, "running_mean");
  expect_close(s.running_var, expected_var, 1e-6, "running_var");
}

TEST(BatchNorm, EvalUsesRunningStatistics) {
  Inputs s;
  const std::vector<float> running_mean0 = s.running_mean, running_var0 = s.running_var;
  Tensor y;
  BatchNormCache cache;
  batch_norm1d_forward(y, cache, s.running_mean, s.running_var, s.x, s.gamma, s.beta, false,
                       kRows, {});
  std::vector<double> mean(s.running_mean.begin(), s.running_mean.end());
  std::vector<double> var(s.running_var.begin(), s.running_var.end());
  expect_close(span_of(y), span_of(affine_reference(s.x, mean, var, s)), 1e-5, "eval y");
  expect_close(s.running_mean, running_mean0, 0.0, "running_mean untouched in eval");
  expect_close(s.running_var, running_var0, 0.0, "running_var untouched in eval");
  Tensor d_x;
  std::vector<float> d_gamma(kCols), d_beta(kCols);
  EXPECT_THROW(batch_norm1d_backward(d_x, d_gamma, d_beta, cache, s.r, s.gamma, kRows, {}),
               Error);
}

TEST(BatchNorm, GradientsMatchFiniteDifferences) {
  Inputs s;
  Tensor y;
  BatchNormCache cache;
  batch_norm1d_forward(y, cache, s.running_mean, s.running_var, s.x, s.gamma, s.beta, true,
                       kRows, {});
  Tensor d_x = random_tensor(kRows, kCols, 7);  // stale contents: must be overwritten
  std::vector<float> d_gamma(kCols, 0.0f), d_beta(kCols, 0.0f);
  batch_norm1d_backward(d_x, d_gamma, d_beta, cache, s.r, s.gamma, kRows, {});

  Tensor probe_y;
  BatchNormCache probe_cache;
  std::vector<float> probe_mean(kCols, 0.0f), probe_var(kCols, 1.0f);
  auto loss = [&] {
    batch_norm1d_forward(probe_y, probe_cache, probe_mean, probe_var, s.x, s.gamma, s.beta, true,
                         kRows, {});
    return dot(probe_y, s.r);
  };
  // Smooth in x (std ~1.4): step 1e-2 leaves a truncation error ~1e-5 plus float32 rounding
  // of the loss ~1e-7 / 1e-2; measured <= 3e-5, 3e-4 gives 10x.
  expect_gradient("d_x", span_of(s.x), span_of(d_x), loss, 1e-2f, 3e-4);
  expect_gradient("d_gamma", s.gamma, d_gamma, loss, 1e-2f, 3e-4);
  expect_gradient("d_beta", s.beta, d_beta, loss, 1e-2f, 3e-4);
}

Tensor rows_of(const Tensor& t, std::int64_t begin, std::int64_t end) {
  Tensor out(end - begin, t.cols());
  std::copy(t.row<float>(begin), t.row<float>(end), out.f32());
  return out;
}

// Rows [0, 4) on "rank 0" and [4, 9) on "rank 1". A rank's all-reduce needs the other's local
// sums, so each phase runs twice: first recording every rank's local sums (results thrown
// away), then with an all-reduce that returns their total.
TEST(BatchNorm, TwoRanksWithAllReduceEqualOne) {
  Inputs s;
  const std::int64_t split = 4;
  struct Rank {
    Tensor x, r, y, d_x;
    BatchNormCache cache;
    std::vector<float> running_mean, running_var, d_gamma, d_beta;
    std::vector<double> local_sums;
  };
  Rank ranks[2];
  ranks[0].x = rows_of(s.x, 0, split);
  ranks[1].x = rows_of(s.x, split, kRows);
  ranks[0].r = rows_of(s.r, 0, split);
  ranks[1].r = rows_of(s.r, split, kRows);
  auto record = [&](Rank& rank) {
    return BatchNormAllReduce([&rank](std::span<double> sums) {
      rank.local_sums.assign(sums.begin(), sums.end());
    });
  };
  BatchNormAllReduce total = [&](std::span<double> sums) {
    ASSERT_EQ(sums.size(), ranks[0].local_sums.size());
    for (std::size_t i = 0; i < sums.size(); ++i)
      sums[i] = ranks[0].local_sums[i] + ranks[1].local_sums[i];
  };
  auto forward = [&](Rank& rank, const BatchNormAllReduce& all_reduce) {
    rank.running_mean = s.running_mean;
    rank.running_var = s.running_var;
    batch_norm1d_forward(rank.y, rank.cache, rank.running_mean, rank.running_var, rank.x,
                         s.gamma, s.beta, true, kRows, all_reduce);
  };
  auto backward = [&](Rank& rank, const BatchNormAllReduce& all_reduce) {
    rank.d_gamma.assign(kCols, 0.0f);
    rank.d_beta.assign(kCols, 0.0f);
    batch_norm1d_backward(rank.d_x, rank.d_gamma, rank.d_beta, rank.cache, rank.r, s.gamma,
                          kRows, all_reduce);
  };
  for (Rank& rank : ranks) forward(rank, record(rank));
  for (Rank& rank : ranks) forward(rank, total);
  for (Rank& rank : ranks) backward(rank, record(rank));
  for (Rank& rank : ranks) backward(rank, total);

  Tensor y, d_x;
  BatchNormCache cache;
  std::vector<float> d_gamma(kCols, 0.0f), d_beta(kCols, 0.0f);
  batch_norm1d_forward(y, cache, s.running_mean, s.running_var, s.x, s.gamma, s.beta, true,
                       kRows, {});
  batch_norm1d_backward(d_x, d_gamma, d_beta, cache, s.r, s.gamma, kRows, {});

  // Same sums in a different order: float32 rounding only.
  for (int k = 0; k < 2; ++k) {
    const std::int64_t begin = k == 0 ? 0 : split, end = k == 0 ? split : kRows;
    const std::string rank = "rank " + std::to_string(k) + " ";
    expect_close(span_of(ranks[k].y), span_of(rows_of(y, begin, end)), 1e-5, rank + "y");
    expect_close(span_of(ranks[k].d_x), span_of(rows_of(d_x, begin, end)), 1e-5, rank + "d_x");
    expect_close(ranks[k].running_mean, s.running_mean, 1e-6, rank + "running_mean");
    expect_close(ranks[k].running_var, s.running_var, 1e-6, rank + "running_var");
  }
  // Parameter gradients are local: the trainer's gradient all-reduce sums them.
  std::vector<float> d_gamma_sum(kCols), d_beta_sum(kCols);
  for (std::size_t j = 0; j < kCols; ++j) {
    d_gamma_sum[j] = ranks[0].d_gamma[j] + ranks[1].d_gamma[j];
    d_beta_sum[j] = ranks[0].d_beta[j] + ranks[1].d_beta[j];
  }
  expect_close(d_gamma_sum, d_gamma, 1e-5, "d_gamma summed over ranks");
  expect_close(d_beta_sum, d_beta, 1e-5, "d_beta summed over ranks");
}

TEST(BatchNorm, TrainingNeedsTwoRows) {
  Inputs s;
  Tensor x = random_tensor(1, kCols, 1), y;
  BatchNormCache cache;
  EXPECT_THROW(batch_norm1d_forward(y, cache, s.running_mean, s.running_var, x, s.gamma, s.beta,
                                    true, 1, {}),
               Error);
}

}  // namespace
}  // namespace tessera
