// SPDX-License-Identifier: Apache-2.0
// Tests of the fused elementwise kernels: bias + activation forward against a naive loop and
// backward against central finite differences of a double reference; dropout masks as a pure
// function of (key, global id, feature), their keep rate, scaling, aliasing and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/kernels.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::kFloatEps;
using test::throws_error;

// L = sum w * act(x + bias) in double (the loss whose gradient the backward returns).
double bias_act_loss(const std::vector<double>& x, const std::vector<double>& bias,
                     const std::vector<float>& w, Activation act, std::int64_t f) {
  double loss = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    double v = x[i] + bias[i % static_cast<std::size_t>(f)];
    if (act == Activation::Relu) v = std::max(v, 0.0);
    loss += w[i] * v;
  }
  return loss;
}

TEST(BiasAct, ForwardMatchesNaiveAndMayAlias) {
  for (Activation act : {Activation::None, Activation::Relu}) {
    for (bool with_bias : {false, true}) {
      for (std::int64_t rows : {0, 1, 23}) {
        for (std::int64_t f : test::kWidths) {
          const auto x = test::random_floats(static_cast<std::size_t>(rows * f), 1);
          const auto bias = with_bias ? test::random_floats(static_cast<std::size_t>(f), 2)
                                      : std::vector<float>{};
          std::vector<float> want(x.size());
          for (std::size_t i = 0; i < x.size(); ++i) {
            float v = x[i] + (with_bias ? bias[i % static_cast<std::size_t>(f)] : 0.0f);
            want[i] = act == Activation::Relu && v < 0.0f ? 0.0f : v;
          }
          Tensor xt = test::tensor_from(x, rows, f);
          Tensor y(rows, f);
          bias_act_forward(y, xt, bias, act);
          // One float add and a max: identical to the naive loop.
          EXPECT_TRUE(test::bitwise_equal(test::values_of(y), want, f)) << "F = " << f;
          bias_act_forward(xt, xt, bias, act);  // in place
          EXPECT_TRUE(test::bitwise_equal(test::values_of(xt), want, f)) << "in place, F = " << f;
        }
      }
    }
  }
}

TEST(BiasAct, BackwardMatchesFiniteDifferences) {
  constexpr double kStep = 1e-3;
  for (Activation act : {Activation::None, Activation::Relu}) {
    for (std::int64_t rows : {1, 9}) {
      for (std::int64_t f : {1, 7, 8, 33}) {
        auto x = test::random_floats(static_cast<std::size_t>(rows * f), 3);
        const auto bias = test::random_floats(static_cast<std::size_t>(f), 4, -0.5f, 0.5f);
        const auto w = test::random_floats(x.size(), 5);
        // Keep x + bias away from the ReLU kink so that differences see one linear piece.
        for (std::size_t i = 0; i < x.size(); ++i) {
          const float s = x[i] + bias[i % static_cast<std::size_t>(f)];
          if (std::abs(s) < 0.01f) x[i] += 0.05f;
        }
        Tensor y(rows, f);
        bias_act_forward(y, test::tensor_from(x, rows, f), bias, act);
        Tensor d_x(rows, f);
        std::vector<float> d_bias(static_cast<std::size_t>(f), 0.25f);  // accumulated into
        bias_act_backward(d_x, d_bias, test::tensor_from(w, rows, f), y, act);

        std::vector<double> xd(x.begin(), x.end()), bd(bias.begin(), bias.end());
        std::vector<double> fd_x(x.size()), fd_bias(bias.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
          const double keep = xd[i];
          xd[i] = keep + kStep;
          const double up = bias_act_loss(xd, bd, w, act, f);
          xd[i] = keep - kStep;
          fd_x[i] = (up - bias_act_loss(xd, bd, w, act, f)) / (2 * kStep);
          xd[i] = keep;
        }
        for (std::size_t k = 0; k < bias.size(); ++k) {
          const double keep = bd[k];
          bd[k] = keep + kStep;
          const double up = bias_act_loss(xd, bd, w, act, f);
          bd[k] = keep - kStep;
          fd_bias[k] = 0.25 + (up - bias_act_loss(xd, bd, w, act, f)) / (2 * kStep);
          bd[k] = keep;
        }
        // The loss is piecewise linear: differences are exact up to double cancellation
        // (~1e-16 * |L| / step); d_x itself is exact in float.
        EXPECT_TRUE(test::near(test::values_of(d_x), fd_x, 1e-9, 0.0, f)) << "F = " << f;
        // d_bias: rows float terms summed in double, rounded once, then one float add.
        EXPECT_TRUE(test::near(d_bias, fd_bias, 1e-9, 3 * kFloatEps, f)) << "F = " << f;
      }
    }
  }
}

TEST(BiasAct, BackwardWithoutBiasGradientMayAlias) {
  Tensor y = test::tensor_from({1, 0, 2, 0}, 2, 2);
  Tensor d = test::tensor_from({5, 6, 7, 8}, 2, 2);
  bias_act_backward(d, {}, d, y, Activation::Relu);
  EXPECT_EQ(test::values_of(d), (std::vector<float>{5, 0, 7, 0}));
}

TEST(BiasAct, ChecksShapes) {
  Tensor x(2, 3), y(2, 3), wrong(3, 2);
  const std::vector<float> short_bias = {1.0f};
  EXPECT_TRUE(throws_error([&] { bias_act_forward(y, x, short_bias, Activation::Relu); },
                           ErrorCategory::InvalidArgument, "bias must be empty or have 3 entries"));
  EXPECT_TRUE(throws_error([&] { bias_act_forward(wrong, x, {}, Activation::Relu); },
                           ErrorCategory::InvalidArgument, "y must be (2, 3), found (3, 2)"));
  std::vector<float> d_bias(2);
  EXPECT_TRUE(throws_error([&] { bias_act_backward(x, d_bias, y, y, Activation::None); },
                           ErrorCategory::InvalidArgument, "d_bias must be empty or have 3"));
}

// ---- dropout ----

std::vector<GlobalId> ids_from(std::int64_t first, std::int64_t count, std::int64_t stride) {
  std::vector<GlobalId> ids(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) ids[static_cast<std::size_t>(i)] = first + i * stride;
  return ids;
}

TEST(Dropout, MaskIsDefinedByUniformDrawsOverWidths) {
  const CounterRng rng(11, 2, 1, RngPurpose::Dropout);
  const float p = 0.4f;
  for (std::int64_t rows : {0, 1, 17}) {
    for (std::int64_t f : test::kWidths) {
      const auto ids = ids_from(1000, rows, 7);
      const auto x = test::random_floats(static_cast<std::size_t>(rows * f), 12);
      Tensor y(rows, f);
      dropout_forward(y, test::tensor_from(x, rows, f), p, rng, ids);
      std::vector<double> want(x.size());
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k = 0; k < f; ++k) {
          const bool keep =
              rng.uniform(static_cast<std::uint64_t>(ids[static_cast<std::size_t>(r)]),
                          static_cast<std::uint64_t>(k)) >= p;
          const std::size_t i = static_cast<std::size_t>(r * f + k);
          want[i] = keep ? x[i] / (1.0 - p) : 0.0;
        }
      }
      // The kernel multiplies by scale = 1 / (1 - p) in float: three roundings (1 - p, the
      // reciprocal, the product), each at most kFloatEps relative.
      EXPECT_TRUE(test::near(test::values_of(y), want, 0.0, 4 * kFloatEps, f)) << "F = " << f;
    }
  }
}

TEST(Dropout, MaskDependsOnlyOnGlobalIdNotOnRowPosition) {
  const CounterRng rng(5, 0, 3, RngPurpose::Dropout);
  const std::int64_t f = 33;
  const std::vector<GlobalId> ids = {40, 10, (GlobalId{1} << 33) + 5, 7};
  Tensor ones = test::tensor_from(std::vector<float>(ids.size() * f, 1.0f), 4, f);
  Tensor full(4, f);
  dropout_forward(full, ones, 0.5f, rng, ids);
  // The same nodes presented as a reordered subset (as another rank would hold them).
  const std::vector<GlobalId> subset = {7, (GlobalId{1} << 33) + 5, 40};
  const std::vector<int> where = {3, 2, 0};
  Tensor part_ones = test::tensor_from(std::vector<float>(subset.size() * f, 1.0f), 3, f);
  Tensor part(3, f);
  dropout_forward(part, part_ones, 0.5f, rng, subset);
  for (std::size_t i = 0; i < subset.size(); ++i) {
    for (std::int64_t k = 0; k < f; ++k) {
      ASSERT_EQ(part.f32()[static_cast<std::int64_t>(i) * f + k], full.f32()[where[i] * f + k])
          << "global id " << subset[i] << ", feature " << k;
    }
  }
  // Another epoch draws another mask.
  Tensor next(4, f);
  dropout_forward(next, ones, 0.5f, CounterRng(5, 1, 3, RngPurpose::Dropout), ids);
  EXPECT_NE(test::values_of(next), test::values_of(full));
}

TEST(Dropout, DroppedNonFiniteInputsBecomeZero) {
  const std::int64_t f = 64;
  Tensor x = test::tensor_from(std::vector<float>(f, NAN), 1, f);
  Tensor y(1, f);
  dropout_forward(y, x, 0.5f, CounterRng(2, 0, 0, RngPurpose::Dropout), ids_from(9, 1, 1));
  int dropped = 0;
  for (float v : test::values_of(y)) {
    EXPECT_TRUE(std::isnan(v) || v == 0.0f);
    dropped += v == 0.0f;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, f);
}

TEST(Dropout, KeepRateIsOneMinusP) {
  const std::int64_t rows = 2000, f = 64;
  Tensor ones = test::tensor_from(std::vector<float>(rows * f, 1.0f), rows, f);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    Tensor y(rows, f);
    dropout_forward(y, ones, p, CounterRng(3, 0, 0, RngPurpose::Dropout), ids_from(0, rows, 1));
    double kept = 0;
    for (float v : test::values_of(y)) kept += v != 0.0f;
    const double n = static_cast<double>(rows * f);
    // Binomial(n, 1 - p): allow 5 standard deviations.
    EXPECT_NEAR(kept / n, 1.0 - p, 5 * std::sqrt(p * (1.0 - p) / n)) << "p = " << p;
  }
}

TEST(Dropout, ZeroRateIsIdentityAndInPlaceWorks) {
  const CounterRng rng(1, 0, 0, RngPurpose::Dropout);
  Tensor x = test::random_tensor(6, 9, 3);
  const auto ids = ids_from(0, 6, 1);
  Tensor y(6, 9);
  dropout_forward(y, x, 0.0f, rng, ids);
  EXPECT_TRUE(test::bitwise_equal(test::values_of(y), test::values_of(x), 9));
  dropout_forward(y, x, 0.3f, rng, ids);
  dropout_forward(x, x, 0.3f, rng, ids);  // in place
  EXPECT_TRUE(test::bitwise_equal(test::values_of(x), test::values_of(y), 9));
}

TEST(Dropout, BackwardMatchesFiniteDifferencesAndForwardMask) {
  const CounterRng rng(9, 4, 2, RngPurpose::Dropout);
  const float p = 0.3f;
  for (std::int64_t f : {1, 7, 9, 32}) {
    const std::int64_t rows = 5;
    const auto ids = ids_from(77, rows, 3);
    const auto w = test::random_floats(static_cast<std::size_t>(rows * f), 4);
    Tensor d_x(rows, f);
    dropout_backward(d_x, test::tensor_from(w, rows, f), p, rng, ids);
    // L(x) = sum w * dropout(x) is linear, so a central difference of the double reference is
    // exact up to cancellation: dL/dx = w * keep / (1 - p).
    std::vector<double> fd(w.size());
    const double step = 1e-3;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t k = 0; k < f; ++k) {
        const std::size_t i = static_cast<std::size_t>(r * f + k);
        const bool keep = rng.uniform(static_cast<std::uint64_t>(ids[static_cast<std::size_t>(r)]),
                                      static_cast<std::uint64_t>(k)) >= p;
        auto loss = [&](double xi) { return w[i] * (keep ? xi / (1.0 - p) : 0.0); };
        fd[i] = (loss(0.5 + step) - loss(0.5 - step)) / (2 * step);
      }
    }
    // w * scale in float (three roundings, as in the forward) against differences that are
    // exact to ~1e-13.
    EXPECT_TRUE(test::near(test::values_of(d_x), fd, 1e-12, 4 * kFloatEps, f)) << "F = " << f;
  }
}

TEST(Dropout, ThreadCountDoesNotChangeMask) {
  const std::int64_t rows = 3000, f = 33;
  Tensor x = test::random_tensor(rows, f, 2);
  const auto ids = ids_from(5, rows, 2);
  const CounterRng rng(8, 0, 0, RngPurpose::Dropout);
  Tensor one(rows, f), two(rows, f);
  {
    test::ThreadCount threads(1);
    dropout_forward(one, x, 0.5f, rng, ids);
  }
  {
    test::ThreadCount threads(2);
    dropout_forward(two, x, 0.5f, rng, ids);
  }
  EXPECT_TRUE(test::bitwise_equal(test::values_of(two), test::values_of(one), f));
}

TEST(Dropout, ChecksRateAndIds) {
  const CounterRng rng(1, 0, 0, RngPurpose::Dropout);
  Tensor x(3, 2), y(3, 2);
  const auto ids = ids_from(0, 3, 1);
  for (float p : {1.0f, -0.1f, NAN}) {
    EXPECT_TRUE(throws_error([&] { dropout_forward(y, x, p, rng, ids); },
                             ErrorCategory::InvalidArgument, "p must be in [0, 1)"));
  }
  const auto short_ids = ids_from(0, 2, 1);
  EXPECT_TRUE(throws_error([&] { dropout_backward(y, x, 0.5f, rng, short_ids); },
                           ErrorCategory::InvalidArgument, "global_ids must have 3 entries"));
}

}  // namespace
}  // namespace tessera
