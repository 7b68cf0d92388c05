// SPDX-License-Identifier: Apache-2.0
// Tests of the loss kernels: log-softmax against a double reference over many class counts
// (also with huge logits), NLL sums, the log-softmax + NLL gradient and the sigmoid BCE loss and
// gradient against central finite differences of double references; NaN targets skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/kernels.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::kFloatEps;
using test::throws_error;

std::vector<double> log_softmax_reference(const std::vector<double>& z, std::int64_t rows,
                                          std::int64_t c) {
  std::vector<double> out(z.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* zr = z.data() + r * c;
    const double m = *std::max_element(zr, zr + c);
    double s = 0.0;
    for (std::int64_t k = 0; k < c; ++k) s += std::exp(zr[k] - m);
    for (std::int64_t k = 0; k < c; ++k)
      out[static_cast<std::size_t>(r * c + k)] = zr[k] - m - std::log(s);
  }
  return out;
}

std::vector<std::int64_t> random_labels(std::int64_t rows, std::int64_t c, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, c - 1);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(rows));
  for (auto& l : labels) l = pick(gen);
  return labels;
}

TEST(LogSoftmax, MatchesReferenceOverClassCounts) {
  for (float range : {3.0f, 1000.0f}) {  // 1000: exp would overflow without the max shift
    for (std::int64_t rows : {0, 1, 13}) {
      for (std::int64_t c : test::kWidths) {
        const auto z = test::random_floats(static_cast<std::size_t>(rows * c), 1, -range, range);
        Tensor logp(rows, c);
        log_softmax_forward(logp, test::tensor_from(z, rows, c));
        const auto want = log_softmax_reference(std::vector<double>(z.begin(), z.end()), rows, c);
        // Float error: z - max, C rounded exps summed, one log: about (C + 8) eps relative to
        // 1 + |logp|.
        std::vector<double> tol(want.size());
        for (std::size_t i = 0; i < tol.size(); ++i)
          tol[i] = (c + 8) * kFloatEps * (1 + std::abs(want[i]));
        EXPECT_TRUE(test::near_each(test::values_of(logp), want, tol, c))
            << "C = " << c << ", range " << range;
        Tensor in_place = test::tensor_from(z, rows, c);
        log_softmax_forward(in_place, in_place);
        EXPECT_TRUE(test::bitwise_equal(test::values_of(in_place), test::values_of(logp), c));
      }
    }
  }
}

TEST(NllLoss, SumsListedRowsIncludingRepeats) {
  const std::int64_t rows = 6, c = 5;
  Tensor logp = test::random_tensor(rows, c, 2, -4.0f, 0.0f);
  const auto labels = random_labels(rows, c, 3);
  const std::vector<NodeId> listed = {4, 0, 4};
  double want = 0.0;
  for (NodeId r : listed) want -= logp.f32()[r * c + labels[static_cast<std::size_t>(r)]];
  // Three float terms summed in double either way: exact up to double rounding.
  EXPECT_NEAR(nll_loss_sum(logp, labels, listed), want, 1e-12);
  EXPECT_EQ(nll_loss_sum(logp, labels, {}), 0.0);
}

TEST(NllLoss, RefusesBadLabelsAndRows) {
  Tensor logp(3, 4);
  std::vector<std::int64_t> labels = {0, 4, 1};
  const std::vector<NodeId> row1 = {1}, row0 = {0}, row7 = {7};
  EXPECT_TRUE(throws_error([&] { nll_loss_sum(logp, labels, row1); }, ErrorCategory::InvalidInput,
                           "label 4 of row 1 is outside [0, 4)"));
  EXPECT_NO_THROW(nll_loss_sum(logp, labels, row0));  // unlisted rows may hold any label
  EXPECT_TRUE(throws_error([&] { nll_loss_sum(logp, labels, row7); },
                           ErrorCategory::InvalidArgument, "rows[0] = 7 is outside [0, 3)"));
  const std::vector<std::int64_t> short_labels = {0};
  EXPECT_TRUE(throws_error([&] { nll_loss_sum(logp, short_labels, row0); },
                           ErrorCategory::InvalidArgument, "labels must have 3 entries, found 1"));
}

TEST(LogSoftmaxNll, BackwardMatchesFiniteDifferences) {
  constexpr double kStep = 1e-4;
  const float scale = 0.37f;
  for (std::int64_t c : {1, 2, 7, 8, 9, 33}) {
    const std::int64_t rows = 6;
    const auto z = test::random_floats(static_cast<std::size_t>(rows * c), 4, -3.0f, 3.0f);
    const auto labels = random_labels(rows, c, 5);
    const std::vector<NodeId> listed = {5, 1, 2};  // rows 0, 3, 4 get no gradient
    auto loss = [&](const std::vector<double>& zd) {
      const auto lp = log_softmax_reference(zd, rows, c);
      double sum = 0.0;
      for (NodeId r : listed)
        sum -= lp[static_cast<std::size_t>(r * c + labels[static_cast<std::size_t>(r)])];
      return scale * sum;
    };
    Tensor logp(rows, c);
    log_softmax_forward(logp, test::tensor_from(z, rows, c));
    Tensor d_logits = test::tensor_from(std::vector<float>(z.size(), NAN), rows, c);
    log_softmax_nll_backward(d_logits, logp, labels, listed, scale);

    std::vector<double> zd(z.begin(), z.end()), fd(z.size());
    for (std::size_t i = 0; i < zd.size(); ++i) {
      const double keep = zd[i];
      zd[i] = keep + kStep;
      const double up = loss(zd);
      zd[i] = keep - kStep;
      fd[i] = (up - loss(zd)) / (2 * kStep);
      zd[i] = keep;
    }
    // exp of a float log-probability off by (C + 8) eps (1 + |logp|), |logp| < 10 here, times
    // scale; the differences themselves are accurate to about step^2 = 1e-8.
    const double tol = scale * (c + 8) * kFloatEps * 11 + 1e-7;
    EXPECT_TRUE(test::near(test::values_of(d_logits), fd, tol, 0.0, c)) << "C = " << c;
  }
}

TEST(LogSoftmaxNll, BackwardRefusesRepeatedRowsAndAliasing) {
  Tensor logp(4, 3), d(4, 3);
  const std::vector<std::int64_t> labels = {0, 1, 2, 0};
  const std::vector<NodeId> repeated = {1, 1};
  EXPECT_TRUE(throws_error([&] { log_softmax_nll_backward(d, logp, labels, repeated, 1.0f); },
                           ErrorCategory::InvalidArgument, "listed twice"));
  const std::vector<NodeId> one = {1};
  EXPECT_TRUE(throws_error([&] { log_softmax_nll_backward(logp, logp, labels, one, 1.0f); },
                           ErrorCategory::InvalidArgument, "must not share memory"));
}

// ---- sigmoid binary cross-entropy ----

double bce_reference(double z, double t) {  // textbook form, fine for moderate z
  const double s = 1.0 / (1.0 + std::exp(-z));
  return -(t * std::log(s) + (1.0 - t) * std::log(1.0 - s));
}

TEST(SigmoidBce, LossSumsNonNanTermsOfListedRows) {
  const std::int64_t rows = 7, t = 9;
  const auto z = test::random_floats(static_cast<std::size_t>(rows * t), 6, -5.0f, 5.0f);
  auto y = test::random_floats(z.size(), 7, 0.0f, 1.0f);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = i % 4 == 3 ? NAN : std::round(y[i]);
  const std::vector<NodeId> listed = {6, 0, 3};
  double want = 0.0;
  std::int64_t want_count = 0;
  for (NodeId r : listed) {
    for (std::int64_t k = 0; k < t; ++k) {
      const std::size_t i = static_cast<std::size_t>(r * t + k);
      if (std::isnan(y[i])) continue;
      want += bce_reference(z[i], y[i]);
      ++want_count;
    }
  }
  std::int64_t count = -1;
  const double got = sigmoid_bce_loss_sum(test::tensor_from(z, rows, t),
                                          test::tensor_from(y, rows, t), listed, &count);
  EXPECT_EQ(count, want_count);
  // Both in double from the same float inputs; the two forms agree to ~1e-15 relative per term.
  EXPECT_NEAR(got, want, 1e-12 * want_count);
  EXPECT_EQ(sigmoid_bce_loss_sum(test::tensor_from(z, rows, t), test::tensor_from(y, rows, t), {},
                                 &count),
            0.0);
  EXPECT_EQ(count, 0);
}

TEST(SigmoidBce, StableForHugeLogits) {
  Tensor z = test::tensor_from({100.0f, -100.0f, 100.0f, -100.0f}, 1, 4);
  Tensor y = test::tensor_from({0.0f, 1.0f, 1.0f, 0.0f}, 1, 4);
  const std::vector<NodeId> row0 = {0};
  std::int64_t count = 0;
  const double loss = sigmoid_bce_loss_sum(z, y, row0, &count);
  EXPECT_EQ(count, 4);
  // Two confidently wrong terms of 100 each (+ log1p(e^-100)), two right ones of ~e^-100.
  EXPECT_NEAR(loss, 200.0, 1e-12);
  Tensor d(1, 4);
  sigmoid_bce_backward(d, z, y, row0, 1.0f);
  // sigmoid(+-100) is 1 or e^-100 (a float denormal): gradients +-1 and ~0, never NaN.
  const std::vector<double> want = {1.0, -1.0, 0.0, 0.0};
  EXPECT_TRUE(test::near(test::values_of(d), want, 1e-30, 0.0, 4));
}

TEST(SigmoidBce, BackwardMatchesFiniteDifferences) {
  constexpr double kStep = 1e-4;
  const float scale = 1.0f / 3;
  for (std::int64_t t : {1, 7, 8, 9, 33}) {
    const std::int64_t rows = 5;
    const auto z = test::random_floats(static_cast<std::size_t>(rows * t), 8, -4.0f, 4.0f);
    auto y = test::random_floats(z.size(), 9, 0.0f, 1.0f);
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (i % 5 == 2) y[i] = NAN;
    }
    const std::vector<NodeId> listed = {0, 4, 2};
    auto loss = [&](const std::vector<double>& zd) {
      double sum = 0.0;
      for (NodeId r : listed) {
        for (std::int64_t k = 0; k < t; ++k) {
          const std::size_t i = static_cast<std::size_t>(r * t + k);
          if (!std::isnan(y[i])) sum += bce_reference(zd[i], y[i]);
        }
      }
      return scale * sum;
    };
    Tensor d(rows, t);
    sigmoid_bce_backward(d, test::tensor_from(z, rows, t), test::tensor_from(y, rows, t), listed,
                         scale);
    std::vector<double> zd(z.begin(), z.end()), fd(z.size());
    for (std::size_t i = 0; i < zd.size(); ++i) {
      const double keep = zd[i];
      zd[i] = keep + kStep;
      const double up = loss(zd);
      zd[i] = keep - kStep;
      fd[i] = (up - loss(zd)) / (2 * kStep);
      zd[i] = keep;
    }
    // Float sigmoid and subtraction: a few eps, times scale; differences good to ~1e-8.
    EXPECT_TRUE(test::near(test::values_of(d), fd, 8 * kFloatEps * scale + 1e-7, 0.0, t))
        << "T = " << t;
  }
}

TEST(SigmoidBce, ChecksShapes) {
  Tensor z(2, 3), y(3, 2);
  std::int64_t count = 0;
  EXPECT_TRUE(throws_error([&] { sigmoid_bce_loss_sum(z, y, {}, &count); },
                           ErrorCategory::InvalidArgument, "targets must be (2, 3), found (3, 2)"));
  Tensor y_ok(2, 3);
  EXPECT_TRUE(throws_error([&] { sigmoid_bce_loss_sum(z, y_ok, {}, nullptr); },
                           ErrorCategory::InvalidArgument, "count is null"));
}

}  // namespace
}  // namespace tessera
