// SPDX-License-Identifier: Apache-2.0
// Tests of the batch-norm kernels: statistics and forward against double loops, the whole
// stats -> forward -> backward_stats -> backward chain against central finite differences of a
// double reference, statistics split over two "ranks" and summed, and thread independence.
#include <gtest/gtest.h>

#include <cmath>

#include "core/kernels.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::kFloatEps;
using test::throws_error;

constexpr double kBnEps = 1e-5;

// L = sum w * batch_norm(x) with batch statistics (biased variance), all in double.
double bn_loss(const std::vector<double>& x, const std::vector<float>& gamma,
               const std::vector<float>& beta, const std::vector<float>& w, std::int64_t rows,
               std::int64_t f) {
  double loss = 0.0;
  for (std::int64_t k = 0; k < f; ++k) {
    double sum = 0.0, sum_sq = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const double v = x[static_cast<std::size_t>(r * f + k)];
      sum += v;
      sum_sq += v * v;
    }
    const double mean = sum / rows, inv_std = 1.0 / std::sqrt(sum_sq / rows - mean * mean + kBnEps);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::size_t i = static_cast<std::size_t>(r * f + k);
      loss += w[i] * (gamma[static_cast<std::size_t>(k)] * (x[i] - mean) * inv_std +
                      beta[static_cast<std::size_t>(k)]);
    }
  }
  return loss;
}

// mean and inv_std from the (all-reduced) sums, as a layer computes them.
void moments(std::vector<float>& mean, std::vector<float>& inv_std, const std::vector<double>& sum,
             const std::vector<double>& sum_sq, double count) {
  mean.resize(sum.size());
  inv_std.resize(sum.size());
  for (std::size_t k = 0; k < sum.size(); ++k) {
    const double m = sum[k] / count;
    mean[k] = static_cast<float>(m);
    inv_std[k] = static_cast<float>(1.0 / std::sqrt(sum_sq[k] / count - m * m + kBnEps));
  }
}

TEST(BatchNorm, StatsAndForwardMatchNaive) {
  for (std::int64_t rows : {0, 1, 29}) {
    for (std::int64_t f : test::kWidths) {
      const auto x = test::random_floats(static_cast<std::size_t>(rows * f), 1, -2.0f, 3.0f);
      Tensor xt = test::tensor_from(x, rows, f);
      std::vector<double> sum(static_cast<std::size_t>(f), -1.0), sum_sq = sum;
      batch_norm_stats(sum, sum_sq, xt);
      std::vector<double> want_sum(sum.size(), 0.0), want_sq(sum.size(), 0.0);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k = 0; k < f; ++k) {
          const double v = x[static_cast<std::size_t>(r * f + k)];
          want_sum[static_cast<std::size_t>(k)] += v;
          want_sq[static_cast<std::size_t>(k)] += v * v;
        }
      }
      for (std::size_t k = 0; k < sum.size(); ++k) {
        // Same double sums in the same row order (one block at these sizes).
        EXPECT_EQ(sum[k], want_sum[k]);
        EXPECT_EQ(sum_sq[k], want_sq[k]);
      }
      const auto gamma = test::random_floats(sum.size(), 2, 0.5f, 1.5f);
      const auto beta = test::random_floats(sum.size(), 3);
      std::vector<float> mean, inv_std;
      moments(mean, inv_std, sum, sum_sq, std::max<double>(1.0, static_cast<double>(rows)));
      Tensor y(rows, f), x_hat(rows, f);
      batch_norm_forward(y, x_hat, xt, mean, inv_std, gamma, beta);
      std::vector<double> want_xhat(x.size()), want_y(x.size()), tol_xhat(x.size()),
          tol_y(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t k = i % static_cast<std::size_t>(f);
        want_xhat[i] = (static_cast<double>(x[i]) - mean[k]) * inv_std[k];
        want_y[i] = gamma[k] * want_xhat[i] + beta[k];
        // Two float roundings for x_hat, two more for y.
        tol_xhat[i] = 2 * kFloatEps * std::abs(want_xhat[i]);
        tol_y[i] = 4 * kFloatEps * (std::abs(gamma[k] * want_xhat[i]) + std::abs(beta[k]));
      }
      EXPECT_TRUE(test::near_each(test::values_of(x_hat), want_xhat, tol_xhat, f)) << "F = " << f;
      EXPECT_TRUE(test::near_each(test::values_of(y), want_y, tol_y, f)) << "F = " << f;
    }
  }
}

TEST(BatchNorm, ChainMatchesFiniteDifferences) {
  constexpr double kStep = 1e-4;
  for (std::int64_t rows : {1, 2, 11}) {
    for (std::int64_t f : {1, 7, 8, 9, 33}) {
      // Rows at least 0.5 apart in every column keep the variance away from 0, where the
      // gradient (~ inv_std) and the difference quotient's truncation error blow up.
      auto x = test::random_floats(static_cast<std::size_t>(rows * f), 4, -0.25f, 0.25f);
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] += static_cast<float>(i / static_cast<std::size_t>(f));
      const auto w = test::random_floats(x.size(), 5);
      const auto gamma = test::random_floats(static_cast<std::size_t>(f), 6, 0.5f, 1.5f);
      const auto beta = test::random_floats(static_cast<std::size_t>(f), 7);
      // The kernel chain, as a layer runs it.
      Tensor xt = test::tensor_from(x, rows, f), wt = test::tensor_from(w, rows, f);
      std::vector<double> sum(static_cast<std::size_t>(f)), sum_sq(sum.size());
      batch_norm_stats(sum, sum_sq, xt);
      std::vector<float> mean, inv_std;
      moments(mean, inv_std, sum, sum_sq, static_cast<double>(rows));
      Tensor y(rows, f), x_hat(rows, f), d_x(rows, f);
      batch_norm_forward(y, x_hat, xt, mean, inv_std, gamma, beta);
      std::vector<double> sum_dy(sum.size()), sum_dy_xhat(sum.size());
      batch_norm_backward_stats(sum_dy, sum_dy_xhat, wt, x_hat);
      batch_norm_backward(d_x, wt, x_hat, gamma, inv_std, sum_dy, sum_dy_xhat,
                          static_cast<double>(rows));

      std::vector<double> xd(x.begin(), x.end()), fd(x.size()), tol(x.size());
      for (std::size_t i = 0; i < xd.size(); ++i) {
        const double keep = xd[i];
        xd[i] = keep + kStep;
        const double up = bn_loss(xd, gamma, beta, w, rows, f);
        xd[i] = keep - kStep;
        fd[i] = (up - bn_loss(xd, gamma, beta, w, rows, f)) / (2 * kStep);
        xd[i] = keep;
        // d_x = gamma inv_std (d_y - mean_dy - x_hat mean_dy_xhat) in float, with x_hat and
        // inv_std themselves a few eps off: 32 eps of gamma inv_std (1 + |x_hat|); the
        // differences add ~step^2 * |L'''| < 1e-6 for these well-conditioned columns.
        const std::size_t k = i % static_cast<std::size_t>(f);
        tol[i] = 32 * kFloatEps * gamma[k] * inv_std[k] * (1 + std::abs(x_hat.f32()[i])) + 1e-6;
      }
      EXPECT_TRUE(test::near_each(test::values_of(d_x), fd, tol, f)) << rows << " rows, F = " << f;
    }
  }
}

TEST(BatchNorm, StatisticsSplitOverRanksAddUp) {
  const std::int64_t rows = 40, f = 9, split = 17;
  const auto x = test::random_floats(static_cast<std::size_t>(rows * f), 8);
  const auto w = test::random_floats(x.size(), 9);
  const std::vector<float> gamma(static_cast<std::size_t>(f), 1.25f), beta(gamma.size(), 0.5f);
  auto part = [&](const std::vector<float>& v, std::int64_t begin, std::int64_t end) {
    return test::tensor_from(std::vector<float>(v.begin() + begin * f, v.begin() + end * f),
                             end - begin, f);
  };
  Tensor whole = test::tensor_from(x, rows, f);
  Tensor first = part(x, 0, split), second = part(x, split, rows);
  std::vector<double> sum(gamma.size()), sum_sq(gamma.size()), s1 = sum, q1 = sum, s2 = sum,
                                                               q2 = sum;
  batch_norm_stats(sum, sum_sq, whole);
  batch_norm_stats(s1, q1, first);
  batch_norm_stats(s2, q2, second);
  for (std::size_t k = 0; k < sum.size(); ++k) {
    // An all-reduce adds the two partial double sums: only the summation order differs.
    EXPECT_NEAR(s1[k] + s2[k], sum[k], 1e-13);
    EXPECT_NEAR(q1[k] + q2[k], sum_sq[k], 1e-13);
  }
  // Backward on the second "rank" with all-reduced sums equals the whole-graph rows.
  std::vector<float> mean, inv_std;
  moments(mean, inv_std, sum, sum_sq, rows);
  Tensor y(rows, f), x_hat(rows, f), d_x(rows, f);
  batch_norm_forward(y, x_hat, whole, mean, inv_std, gamma, beta);
  Tensor wt = test::tensor_from(w, rows, f);
  std::vector<double> sdy(gamma.size()), sdyx(gamma.size());
  batch_norm_backward_stats(sdy, sdyx, wt, x_hat);
  batch_norm_backward(d_x, wt, x_hat, gamma, inv_std, sdy, sdyx, rows);
  Tensor xh2 = part(test::values_of(x_hat), split, rows), w2 = part(w, split, rows);
  Tensor d2(rows - split, f);
  batch_norm_backward(d2, w2, xh2, gamma, inv_std, sdy, sdyx, rows);
  const auto whole_dx = test::values_of(d_x);
  EXPECT_TRUE(test::bitwise_equal(
      test::values_of(d2), std::vector<float>(whole_dx.begin() + split * f, whole_dx.end()), f));
}

TEST(BatchNorm, StatsIndependentOfThreadCount) {
  Tensor x = test::random_tensor(5000, 33, 10);  // several reduction blocks
  std::vector<double> s1(33), q1(33), s2(33), q2(33);
  {
    test::ThreadCount threads(1);
    batch_norm_stats(s1, q1, x);
  }
  {
    test::ThreadCount threads(2);
    batch_norm_stats(s2, q2, x);
  }
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(q1, q2);
}

TEST(BatchNorm, BackwardMayWriteIntoItsGradientInput) {
  Tensor x_hat = test::random_tensor(6, 4, 11), d = test::random_tensor(6, 4, 12);
  const std::vector<float> gamma(4, 2.0f), inv_std(4, 0.5f);
  std::vector<double> sdy(4), sdyx(4);
  batch_norm_backward_stats(sdy, sdyx, d, x_hat);
  Tensor separate(6, 4);
  batch_norm_backward(separate, d, x_hat, gamma, inv_std, sdy, sdyx, 6.0);
  batch_norm_backward(d, d, x_hat, gamma, inv_std, sdy, sdyx, 6.0);
  EXPECT_TRUE(test::bitwise_equal(test::values_of(d), test::values_of(separate), 4));
}

TEST(BatchNorm, ChecksArguments) {
  Tensor x(3, 4), y(3, 4), x_hat(3, 4);
  std::vector<double> four(4), three(3);
  const std::vector<float> f4(4, 1.0f), f3(3, 1.0f);
  EXPECT_TRUE(throws_error([&] { batch_norm_stats(three, four, x); },
                           ErrorCategory::InvalidArgument, "sum must have 4 entries, found 3"));
  EXPECT_TRUE(throws_error([&] { batch_norm_forward(y, x_hat, x, f4, f4, f3, f4); },
                           ErrorCategory::InvalidArgument, "gamma must have 4 entries"));
  EXPECT_TRUE(throws_error([&] { batch_norm_forward(y, y, x, f4, f4, f4, f4); },
                           ErrorCategory::InvalidArgument, "y must not share memory with x_hat"));
  EXPECT_TRUE(throws_error([&] { batch_norm_backward(y, x, x_hat, f4, f4, four, four, 0.0); },
                           ErrorCategory::InvalidArgument, "count"));
}

}  // namespace
}  // namespace tessera
