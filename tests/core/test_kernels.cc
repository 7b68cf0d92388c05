// SPDX-License-Identifier: Apache-2.0
// Tests of the sparse, dense and row-movement kernels against naive double loops over many
// widths, with zero-degree rows, empty and one-row inputs; SpMM bitwise equal with 1 and 2
// threads; spmm_rows writes only its rows; bf16 rounding against a nearest-even reference and
// SpMM of bf16 rows equal to the f32 SpMM of the rounded rows; GEMM in all transpose
// combinations; and the argument checks of the dispatch layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "core/kernels.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::kFloatEps;
using test::throws_error;

// Naive SpMM in double, with the float rounding bound of each output: summing n terms in float
// (recursive summation) errs by at most about n * eps * sum |terms| (Higham, Accuracy and
// Stability, eq. 4.4), plus one rounding per weighted product.
struct SpmmReference {
  std::vector<double> out;    // (R, F)
  std::vector<double> bound;  // (R, F)
};

SpmmReference spmm_reference(const Csr& a, const std::vector<float>& x, std::int64_t f) {
  SpmmReference ref;
  ref.out.assign(static_cast<std::size_t>(a.num_rows() * f), 0.0);
  ref.bound.assign(ref.out.size(), 0.0);
  for (std::int64_t r = 0; r < a.num_rows(); ++r) {
    const double n = static_cast<double>(a.degree(r)) + 1.0;
    for (std::int64_t k = 0; k < f; ++k) {
      double sum = 0.0, abs_sum = 0.0;
      for (EdgeOffset j = a.indptr()[r]; j < a.indptr()[r + 1]; ++j) {
        const double w = a.has_values() ? a.values()[j] : 1.0;
        const double term = w * x[static_cast<std::size_t>(a.indices()[j] * f + k)];
        sum += term;
        abs_sum += std::abs(term);
      }
      ref.out[static_cast<std::size_t>(r * f + k)] = sum;
      ref.bound[static_cast<std::size_t>(r * f + k)] = (n + 1.0) * kFloatEps * abs_sum;
    }
  }
  return ref;
}

// ---- spmm ----

TEST(Spmm, MatchesNaiveOverWidthsWeightedAndUnweighted) {
  for (bool weighted : {false, true}) {
    const Csr a = test::random_csr(203, 150, 7, weighted);  // rectangular, zero-degree rows
    for (std::int64_t f : test::kWidths) {
      const std::vector<float> x = test::random_floats(static_cast<std::size_t>(150 * f), 9);
      Tensor xt = test::tensor_from(x, 150, f);
      Tensor out(203, f);
      spmm(out, a.view(), xt);
      const SpmmReference ref = spmm_reference(a, x, f);
      EXPECT_TRUE(test::near_each(test::values_of(out), ref.out, ref.bound, f))
          << "F = " << f << (weighted ? ", weighted" : ", unweighted");
    }
  }
}

TEST(Spmm, ZeroDegreeRowsAreZeroedNotSkipped) {
  const Csr a(3, 2, {0, 1, 1, 2}, {1, 0});  // row 1 empty
  Tensor x = test::tensor_from({1, 2, 3, 4}, 2, 2);
  Tensor out = test::tensor_from({9, 9, 9, 9, 9, 9}, 3, 2);  // stale contents
  spmm(out, a.view(), x);
  EXPECT_EQ(test::values_of(out), (std::vector<float>{3, 4, 0, 0, 1, 2}));
}

TEST(Spmm, EmptyAndOneRowInputs) {
  const Csr none(0, 4, {0}, {});
  Tensor x = test::random_tensor(4, 7, 1);
  Tensor out(0, 7);
  spmm(out, none.view(), x);  // nothing to do, must not crash

  const Csr no_cols(2, 0, {0, 0, 0}, {});
  Tensor x0(0, 5);
  Tensor out2 = test::random_tensor(2, 5, 2);
  spmm(out2, no_cols.view(), x0);
  for (float v : test::values_of(out2)) EXPECT_EQ(v, 0.0f);

  const Csr one(1, 1, {0, 1}, {0}, {2.0f});
  for (std::int64_t f : test::kWidths) {
    Tensor x1 = test::random_tensor(1, f, 3);
    Tensor out1(1, f);
    spmm(out1, one.view(), x1);
    for (std::int64_t k = 0; k < f; ++k) ASSERT_EQ(out1.f32()[k], 2.0f * x1.f32()[k]);
  }
}

TEST(Spmm, BitwiseIdenticalWithOneAndTwoThreads) {
  // Big enough to run in parallel: (nnz + R) * F well above the serial threshold.
  const Csr a = test::random_csr(6000, 6000, 21, /*with_values=*/true, 30, 4000);
  for (std::int64_t f : {1, 8, 33}) {
    Tensor x = test::random_tensor(6000, f, 22);
    Tensor one(6000, f), two(6000, f);
    {
      test::ThreadCount threads(1);
      spmm(one, a.view(), x);
    }
    {
      test::ThreadCount threads(2);
      spmm(two, a.view(), x);
    }
    EXPECT_TRUE(test::bitwise_equal(test::values_of(two), test::values_of(one), f)) << "F = " << f;
  }
}

TEST(Spmm, RowsWritesOnlyListedRows) {
  const Csr a = test::random_csr(500, 300, 31, true);
  std::vector<NodeId> rows(500);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), std::mt19937(4));
  rows.resize(170);  // a random subset in random order, zero-degree rows included
  for (std::int64_t f : test::kWidths) {
    Tensor x = test::random_tensor(300, f, 5);
    Tensor full(500, f);
    spmm(full, a.view(), x);
    const float sentinel = -12345.0f;
    Tensor out(500, f);
    std::fill(out.f32(), out.f32() + out.numel(), sentinel);
    spmm_rows(out, a.view(), x, rows);
    std::vector<bool> listed(500, false);
    for (NodeId r : rows) listed[static_cast<std::size_t>(r)] = true;
    for (std::int64_t r = 0; r < 500; ++r) {
      for (std::int64_t k = 0; k < f; ++k) {
        const float want = listed[static_cast<std::size_t>(r)] ? full.f32()[r * f + k] : sentinel;
        ASSERT_EQ(out.f32()[r * f + k], want) << "row " << r << " col " << k << " F = " << f;
      }
    }
  }
}

TEST(Spmm, RowsRefusesBadRowLists) {
  const Csr a = test::random_csr(10, 10, 1, false);
  Tensor x = test::random_tensor(10, 4, 1);
  Tensor out(10, 4);
  const std::vector<NodeId> out_of_range = {3, 10};
  const std::vector<NodeId> repeated = {3, 5, 3};
  EXPECT_TRUE(throws_error([&] { spmm_rows(out, a.view(), x, out_of_range); },
                           ErrorCategory::InvalidArgument, "rows[1] = 10 is outside [0, 10)"));
  EXPECT_TRUE(throws_error([&] { spmm_rows(out, a.view(), x, repeated); },
                           ErrorCategory::InvalidArgument, "rows[2] = 3 is listed twice"));
  spmm_rows(out, a.view(), x, {});  // empty list: nothing written
}

TEST(Spmm, ChecksShapesDtypesAndAliasing) {
  const Csr a = test::random_csr(6, 5, 1, false);
  Tensor x = test::random_tensor(5, 3, 1);
  Tensor out(6, 3);
  Tensor wrong_x(4, 3), wrong_out(6, 4), ints(6, 3, DType::I32);
  EXPECT_TRUE(throws_error([&] { spmm(out, a.view(), wrong_x); }, ErrorCategory::InvalidArgument,
                           "A.num_cols = 5 rows, found (4, 3)"));
  EXPECT_TRUE(throws_error([&] { spmm(wrong_out, a.view(), x); }, ErrorCategory::InvalidArgument,
                           "out must be (6, 3), found (6, 4)"));
  EXPECT_TRUE(throws_error([&] { spmm(ints, a.view(), x); }, ErrorCategory::InvalidArgument,
                           "out must be f32, found i32"));
  const Csr square = test::random_csr(5, 5, 1, false);
  EXPECT_TRUE(throws_error([&] { spmm(x, square.view(), x); }, ErrorCategory::InvalidArgument,
                           "must not share memory"));
}

// ---- bf16 operands ----

// The bf16 value of bits h in double, with the all-ones exponent read as 2^128 (the rounding
// target above the largest finite bf16).
double bf16_value(std::uint32_t h) {
  const double sign = (h & 0x8000u) != 0 ? -1.0 : 1.0;
  const auto exponent = static_cast<int>((h >> 7) & 0xFFu);
  const double mantissa = static_cast<double>(h & 0x7Fu);
  if (exponent == 0) return sign * std::ldexp(mantissa, -133);  // subnormal: m * 2^-126 / 2^7
  return sign * std::ldexp(128.0 + mantissa, exponent - 134);
}

// Rounds v to bf16 by picking the nearer of the truncated value and the next one up in
// magnitude, the one with an even last bit on a tie; NaN keeps its sign and gets the quiet bit.
std::uint16_t bf16_reference(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  if (std::isnan(v)) return static_cast<std::uint16_t>((b >> 16) | 0x40u);
  if (std::isinf(v)) return static_cast<std::uint16_t>(b >> 16);
  const auto low = static_cast<std::uint16_t>(b >> 16);
  const auto high = static_cast<std::uint16_t>(low + 1);
  const double below = std::abs(static_cast<double>(v) - bf16_value(low));
  const double above = std::abs(bf16_value(high) - static_cast<double>(v));
  if (below != above) return below < above ? low : high;
  return (low & 1u) == 0 ? low : high;
}

std::vector<std::uint16_t> bits_of(const Tensor& t) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(t.numel()));
  if (!out.empty()) std::memcpy(out.data(), t.raw(), out.size() * sizeof(std::uint16_t));
  return out;
}

Tensor bf16_of(const Tensor& x) {
  Tensor y(x.rows(), x.cols(), DType::BF16);
  to_bf16(y, x);
  return y;
}

// x with every value replaced by its bf16 rounding, in f32.
Tensor widened(const Tensor& x) {
  const std::vector<std::uint16_t> bits = bits_of(bf16_of(x));
  std::vector<float> values(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const std::uint32_t b = std::uint32_t{bits[i]} << 16;
    std::memcpy(&values[i], &b, sizeof b);
  }
  return test::tensor_from(values, x.rows(), x.cols());
}

TEST(ToBf16, RoundsToNearestEvenAsTheReference) {
  std::vector<float> values = test::random_floats(5000, 41, -3.0f, 3.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::uint32_t b :
       {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F817FFFu,  // ties to even down and up, near ties
        0x00000001u, 0x00008000u, 0x80018000u, 0x007FFFFFu,  // subnormals
        0x7F7FFFFFu, 0xFF7F8000u, 0x7F7F7FFFu,               // overflow to ±Inf and just below it
        0x7FC00001u, 0xFF800001u, 0x7F800001u}) {            // NaNs, quiet and signalling
    float v;
    std::memcpy(&v, &b, sizeof v);
    values.push_back(v);
  }
  for (const float v : {0.0f, -0.0f, inf, -inf, 1.0f, -65504.0f}) values.push_back(v);
  const Tensor x = test::tensor_from(values, static_cast<std::int64_t>(values.size()), 1);
  const std::vector<std::uint16_t> got = bits_of(bf16_of(x));
  for (std::size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(got[i], bf16_reference(values[i])) << "value " << values[i] << " at " << i;
  }
  // Big enough to run in parallel: the same bits with 1 and 2 threads.
  const Tensor big = test::random_tensor(3000, 77, 42);
  std::vector<std::uint16_t> one, two;
  {
    test::ThreadCount threads(1);
    one = bits_of(bf16_of(big));
  }
  {
    test::ThreadCount threads(2);
    two = bits_of(bf16_of(big));
  }
  EXPECT_EQ(one, two);
}

TEST(ToBf16, ChecksDtypesAndShapes) {
  const Tensor x = test::random_tensor(3, 4, 1);
  Tensor f32_y(3, 4), wrong_shape(4, 3, DType::BF16);
  EXPECT_TRUE(throws_error([&] { to_bf16(f32_y, x); }, ErrorCategory::InvalidArgument,
                           "to_bf16: y must be bf16, found f32"));
  EXPECT_TRUE(throws_error([&] { to_bf16(wrong_shape, x); }, ErrorCategory::InvalidArgument,
                           "y must be (3, 4), found (4, 3)"));
}

// ReLU's backward from the output's signs (positive_bits) gives the bits of the backward from
// the output itself, with and without the bias gradient, at widths around the byte boundaries,
// with zeros, negative zeros and NaN (not > 0) in y; large enough at 255 to run in parallel.
TEST(PositiveBits, TheSignsGiveTheReluBackwardOfTheOutput) {
  for (const std::int64_t f : {1, 7, 8, 9, 16, 17, 64, 255}) {
    const std::int64_t r = f == 255 ? 3001 : 37;
    std::vector<float> values =
        test::random_floats(static_cast<std::size_t>(r * f), 5, -1.0f, 1.0f);
    values[0] = 0.0f;
    if (values.size() > 2) values[1] = -0.0f;
    if (values.size() > 3) values[2] = std::numeric_limits<float>::quiet_NaN();
    const Tensor y = test::tensor_from(values, r, f);
    Tensor bits(r, (f + 7) / 8, DType::U8);
    positive_bits(bits, y);
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t k = 0; k < f; ++k)
        ASSERT_EQ((bits.row<std::uint8_t>(i)[k / 8] >> (k % 8)) & 1, y.row<float>(i)[k] > 0.0f)
            << "width " << f << " row " << i << " column " << k;
    const Tensor d = test::random_tensor(r, f, 6);
    for (const bool with_bias : {false, true}) {
      std::vector<float> bias_of_y(static_cast<std::size_t>(f), 0.5f), bias_of_bits = bias_of_y;
      Tensor of_y(r, f), of_bits = d.clone();  // in place, as the layers call it
      bias_act_backward(of_y, with_bias ? std::span<float>(bias_of_y) : std::span<float>(), d, y,
                        Activation::Relu);
      bias_act_backward(of_bits, with_bias ? std::span<float>(bias_of_bits) : std::span<float>(),
                        of_bits, bits, Activation::Relu);
      EXPECT_EQ(0, std::memcmp(of_bits.raw(), of_y.raw(), of_y.bytes())) << "width " << f;
      EXPECT_EQ(bias_of_bits, bias_of_y) << "width " << f;
    }
  }
  Tensor f32_bits(2, 1), short_bits(2, 1, DType::U8), d(2, 9);
  const Tensor y = test::random_tensor(2, 9, 1);
  EXPECT_TRUE(throws_error([&] { positive_bits(f32_bits, y); }, ErrorCategory::InvalidArgument,
                           "positive_bits: bits must be u8, found f32"));
  EXPECT_TRUE(throws_error([&] { bias_act_backward(d, {}, y, short_bits, Activation::Relu); },
                           ErrorCategory::InvalidArgument,
                           "y (bits) must be (2, 2), found (2, 1)"));
  Tensor bits(2, 2, DType::U8);
  EXPECT_TRUE(throws_error([&] { bias_act_backward(d, {}, y, bits, Activation::Elu); },
                           ErrorCategory::InvalidArgument, "serve ReLU only"));
}

TEST(SpmmBf16, EqualsTheF32SumOfTheRoundedRowsBitwise) {
  std::vector<NodeId> rows(203);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), std::mt19937(5));
  rows.resize(80);
  std::vector<std::int64_t> widths = test::kWidths;
  widths.push_back(256);
  for (bool weighted : {false, true}) {
    const Csr a = test::random_csr(203, 150, 7, weighted);  // rectangular, zero-degree rows
    for (std::int64_t f : widths) {
      const Tensor x = test::random_tensor(150, f, 9);
      const Tensor x_bf16 = bf16_of(x);
      Tensor want(203, f), got(203, f);
      spmm(want, a.view(), widened(x));
      spmm(got, a.view(), x_bf16);
      ASSERT_TRUE(test::bitwise_equal(test::values_of(got), test::values_of(want), f))
          << "spmm, F = " << f << (weighted ? ", weighted" : ", unweighted");
      Tensor want_rows = Tensor::zeros(203, f), got_rows = Tensor::zeros(203, f);
      spmm_rows(want_rows, a.view(), widened(x), rows);
      spmm_rows(got_rows, a.view(), x_bf16, rows);
      ASSERT_TRUE(test::bitwise_equal(test::values_of(got_rows), test::values_of(want_rows), f))
          << "spmm_rows, F = " << f << (weighted ? ", weighted" : ", unweighted");
    }
  }
}

TEST(SpmmBf16, ChecksTheOperandDtypes) {
  const Csr a = test::random_csr(6, 5, 1, false);
  const Tensor x = bf16_of(test::random_tensor(5, 3, 1));
  Tensor out_bf16(6, 3, DType::BF16), ints(5, 3, DType::I32), out(6, 3);
  EXPECT_TRUE(throws_error([&] { spmm(out_bf16, a.view(), x); }, ErrorCategory::InvalidArgument,
                           "out must be f32, found bf16"));
  EXPECT_TRUE(throws_error([&] { spmm(out, a.view(), ints); }, ErrorCategory::InvalidArgument,
                           "x must be f32, found i32"));
}

// ---- gemm ----

// c (M, N) = alpha * op(a) * op(b) + beta * c0 in double; bound as in spmm_reference.
void gemm_reference(std::vector<double>& c, std::vector<double>& bound,
                    const std::vector<float>& c0, const std::vector<float>& a, bool trans_a,
                    const std::vector<float>& b, bool trans_b, double alpha, double beta,
                    std::int64_t m, std::int64_t n, std::int64_t k) {
  c.assign(static_cast<std::size_t>(m * n), 0.0);
  bound.assign(c.size(), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0.0, abs_sum = 0.0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double av = a[static_cast<std::size_t>(trans_a ? p * m + i : i * k + p)];
        const double bv = b[static_cast<std::size_t>(trans_b ? j * k + p : p * n + j)];
        sum += av * bv;
        abs_sum += std::abs(av * bv);
      }
      const double c_old = c0[static_cast<std::size_t>(i * n + j)];
      c[static_cast<std::size_t>(i * n + j)] = alpha * sum + beta * c_old;
      bound[static_cast<std::size_t>(i * n + j)] =
          (k + 3) * kFloatEps * (std::abs(alpha) * abs_sum + std::abs(beta * c_old)) + 1e-30;
    }
  }
}

TEST(Gemm, AllTransposeCombinationsWithBetaAccumulation) {
  struct Dims {
    std::int64_t m, n, k;
  };
  for (const Dims d : {Dims{1, 1, 1}, Dims{5, 7, 3}, Dims{33, 17, 9}, Dims{8, 257, 31}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, 2.0f}}) {
          const auto a = test::random_floats(static_cast<std::size_t>(d.m * d.k), 1);
          const auto b = test::random_floats(static_cast<std::size_t>(d.k * d.n), 2);
          auto c0 = test::random_floats(static_cast<std::size_t>(d.m * d.n), 3);
          Tensor at = trans_a ? test::tensor_from(a, d.k, d.m) : test::tensor_from(a, d.m, d.k);
          Tensor bt = trans_b ? test::tensor_from(b, d.n, d.k) : test::tensor_from(b, d.k, d.n);
          Tensor c = test::tensor_from(c0, d.m, d.n);
          if (beta == 0.0f) std::fill(c.f32(), c.f32() + c.numel(), NAN);  // must be ignored
          gemm(c, at, trans_a, bt, trans_b, alpha, beta);
          std::vector<double> want, bound;
          gemm_reference(want, bound, c0, a, trans_a, b, trans_b, alpha, beta, d.m, d.n, d.k);
          EXPECT_TRUE(test::near_each(test::values_of(c), want, bound, d.n))
              << "M N K = " << d.m << " " << d.n << " " << d.k << ", trans " << trans_a << trans_b
              << ", alpha " << alpha << ", beta " << beta;
        }
      }
    }
  }
}

TEST(Gemm, ParallelSplitsMatchReferenceAndThreadCount) {
  struct Dims {
    std::int64_t m, n, k;
  };
  // Row slabs (M >= 1024: forward X W), K-chunks (small M, K >= 2048: weight gradients X^T dY),
  // and a shape served by one call. At M = 1906, K = 300 slabs split halfway (953 rows) gave
  // different sums from one call with OpenBLAS's Prescott and Haswell kernels (ctest runs this
  // with Prescott's too: test_kernels_gemm_prescott).
  for (const Dims d :
       {Dims{3001, 33, 20}, Dims{1906, 9, 300}, Dims{17, 40, 5000}, Dims{64, 70, 1500}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        const auto a = test::random_floats(static_cast<std::size_t>(d.m * d.k), 4);
        const auto b = test::random_floats(static_cast<std::size_t>(d.k * d.n), 5);
        const auto c0 = test::random_floats(static_cast<std::size_t>(d.m * d.n), 6);
        Tensor at = trans_a ? test::tensor_from(a, d.k, d.m) : test::tensor_from(a, d.m, d.k);
        Tensor bt = trans_b ? test::tensor_from(b, d.n, d.k) : test::tensor_from(b, d.k, d.n);
        Tensor one = test::tensor_from(c0, d.m, d.n), two = test::tensor_from(c0, d.m, d.n);
        {
          test::ThreadCount threads(1);
          gemm(one, at, trans_a, bt, trans_b, 0.5f, 2.0f);
        }
        {
          test::ThreadCount threads(2);
          gemm(two, at, trans_a, bt, trans_b, 0.5f, 2.0f);
        }
        std::vector<double> want, bound;
        gemm_reference(want, bound, c0, a, trans_a, b, trans_b, 0.5f, 2.0f, d.m, d.n, d.k);
        EXPECT_TRUE(test::near_each(test::values_of(one), want, bound, d.n))
            << "M N K = " << d.m << " " << d.n << " " << d.k << ", trans " << trans_a << trans_b;
        EXPECT_TRUE(test::bitwise_equal(test::values_of(two), test::values_of(one), d.n))
            << "1 vs 2 threads, M N K = " << d.m << " " << d.n << " " << d.k;
      }
    }
  }
}

TEST(Gemm, DegenerateSizes) {
  Tensor a(3, 0), b(0, 4);
  Tensor c = test::tensor_from(std::vector<float>(12, 2.0f), 3, 4);
  gemm(c, a, false, b, false, 1.0f, 0.5f);  // K = 0: c = beta * c
  for (float v : test::values_of(c)) EXPECT_EQ(v, 1.0f);
  Tensor a0(0, 5), b0(5, 4), c0(0, 4);
  gemm(c0, a0, false, b0, false);
}

TEST(Gemm, ChecksInnerDimensionsAndOutputShape) {
  Tensor a(3, 4), b(5, 2), c(3, 2);
  EXPECT_TRUE(throws_error([&] { gemm(c, a, false, b, false); }, ErrorCategory::InvalidArgument,
                           "op(a) is (3, 4) and op(b) is (5, 2)"));
  Tensor b_ok(4, 2), c_bad(2, 3);
  EXPECT_TRUE(throws_error([&] { gemm(c_bad, a, false, b_ok, false); },
                           ErrorCategory::InvalidArgument, "c must be (3, 2), found (2, 3)"));
  Tensor sq(3, 3);
  EXPECT_TRUE(throws_error([&] { gemm(sq, sq, false, sq, false); }, ErrorCategory::InvalidArgument,
                           "c must not share memory with a"));
}

// ---- bf16 inputs of gemm, dropout_forward and gather_rows (features kept in bf16) ----

TEST(ToF32, WidensEveryValueExactly) {
  const Tensor x = test::random_tensor(3001, 7, 12);  // large enough to run in parallel
  Tensor y(3001, 7);
  to_f32(y, bf16_of(x));
  EXPECT_TRUE(test::bitwise_equal(test::values_of(y), test::values_of(widened(x)), 7));
  Tensor wrong(7, 3001);
  EXPECT_TRUE(throws_error([&] { to_f32(wrong, x); }, ErrorCategory::InvalidArgument,
                           "to_f32: x must be bf16, found f32"));
  EXPECT_TRUE(throws_error([&] { to_f32(wrong, bf16_of(x)); }, ErrorCategory::InvalidArgument,
                           "y must be (3001, 7), found (7, 3001)"));
}

// a in bf16 is widened a block of rows at a time (whole 1024-row slabs, about 8 MiB): with 1100
// columns, 2,100 rows are two blocks (1024 and the rest); with 2,100 columns a block is one slab
// and the rest of 52 rows goes with the last, where on its own it would be summed in K-chunks.
// The products are those of the widened rows within the reference's bound; not transposed, the
// bits of the f32 rows' gemm; the same bits with 1 and 2 threads.
void check_bf16_gemm(std::int64_t k_a) {
  const std::int64_t rows = 2100, n = 9;
  const Tensor a_f32 = test::random_tensor(rows, k_a, 13);
  const Tensor a = bf16_of(a_f32);
  const Tensor a_wide = widened(a_f32);
  const std::vector<float> wide = test::values_of(a_wide);
  for (const bool trans_a : {false, true}) {
    const std::int64_t m = trans_a ? k_a : rows, k = trans_a ? rows : k_a;
    for (const bool trans_b : {false, true}) {
      if (trans_a && trans_b) continue;  // refused below
      const auto b = test::random_floats(static_cast<std::size_t>(k * n), 14);
      const auto c0 = test::random_floats(static_cast<std::size_t>(m * n), 15);
      const Tensor bt = trans_b ? test::tensor_from(b, n, k) : test::tensor_from(b, k, n);
      Tensor one = test::tensor_from(c0, m, n), two = test::tensor_from(c0, m, n);
      Tensor of_f32 = test::tensor_from(c0, m, n);
      {
        test::ThreadCount threads(1);
        gemm(one, a, trans_a, bt, trans_b, 0.5f, 2.0f);
      }
      {
        test::ThreadCount threads(2);
        gemm(two, a, trans_a, bt, trans_b, 0.5f, 2.0f);
      }
      gemm(of_f32, a_wide, trans_a, bt, trans_b, 0.5f, 2.0f);
      std::vector<double> want, bound;
      gemm_reference(want, bound, c0, wide, trans_a, b, trans_b, 0.5, 2.0, m, n, k);
      SCOPED_TRACE(std::string("trans ") + (trans_a ? "a" : "-") + (trans_b ? "b" : "-"));
      EXPECT_TRUE(test::near_each(test::values_of(one), want, bound, n));
      EXPECT_TRUE(test::bitwise_equal(test::values_of(two), test::values_of(one), n));
      if (!trans_a) {
        EXPECT_TRUE(test::bitwise_equal(test::values_of(one), test::values_of(of_f32), n));
      }
    }
  }
}

TEST(Gemm, BF16AIsTheGemmOfItsWidening) {
  for (const std::int64_t k_a : {1100, 2100}) {
    SCOPED_TRACE("K " + std::to_string(k_a));
    check_bf16_gemm(k_a);
  }
  // No rows (K = 0 transposed): c = beta * c.
  const Tensor none(0, 3, DType::BF16), b0(0, 2);
  Tensor halved = test::tensor_from(std::vector<float>(6, 2.0f), 3, 2);
  gemm(halved, none, true, b0, false, 1.0f, 0.5f);
  for (const float v : test::values_of(halved)) EXPECT_EQ(v, 1.0f);
  const Tensor a = bf16_of(test::random_tensor(5, 4, 13)), a_f32 = test::random_tensor(5, 4, 13);
  Tensor c(4, 3), b(3, 5);
  EXPECT_TRUE(throws_error([&] { gemm(c, a, true, b, true); }, ErrorCategory::InvalidArgument,
                           "a in bf16 transposed takes b as it is stored"));
  Tensor c2(5, 3);
  const Tensor b_bf16(4, 3, DType::BF16);
  EXPECT_TRUE(throws_error([&] { gemm(c2, a_f32, false, b_bf16, false); },
                           ErrorCategory::InvalidArgument, "b must be f32, found bf16"));
}

// gemm into a bf16 c: the f32 gemm's products rounded, bit for bit, over two blocks of rows (the
// last one taking the rest) and with b transposed or not; the other combinations are refused.
TEST(Gemm, BF16CIsTheF32GemmRounded) {
  const std::int64_t m = 2500, n = 1100, k = 40;  // blocks of 1,024 rows at this width
  const Tensor a = test::random_tensor(m, k, 17);
  for (const bool trans_b : {false, true}) {
    SCOPED_TRACE(trans_b ? "b transposed" : "b as stored");
    const Tensor b = trans_b ? test::random_tensor(n, k, 18) : test::random_tensor(k, n, 18);
    Tensor want(m, n), got(m, n, DType::BF16);
    gemm(want, a, false, b, trans_b, 0.5f);
    gemm(got, a, false, b, trans_b, 0.5f);
    EXPECT_EQ(bits_of(got), bits_of(bf16_of(want)));
  }
  Tensor c(5, 3, DType::BF16), c_t(4, 3, DType::BF16);
  const Tensor a_f32 = test::random_tensor(5, 4, 19), b(4, 3), a_bf16 = bf16_of(a_f32);
  const char* refusal = "c in bf16 takes a in f32, not transposed, and beta 0";
  EXPECT_TRUE(throws_error([&] { gemm(c, a_f32, false, b, false, 1.0f, 1.0f); },
                           ErrorCategory::InvalidArgument, refusal));
  EXPECT_TRUE(throws_error([&] { gemm(c, a_bf16, false, b, false); },
                           ErrorCategory::InvalidArgument, refusal));
  EXPECT_TRUE(throws_error([&] { gemm(c_t, a_f32, true, test::random_tensor(5, 3, 20), false); },
                           ErrorCategory::InvalidArgument, refusal));
}

// dropout_forward of bf16 rows (two widening blocks) gives the bits of dropout of their widening;
// and gather_rows of bf16 rows their widened rows.
TEST(Rows, Bf16InputsAreReadAsTheirWidening) {
  const std::int64_t rows = 2100, f = 1100;
  const Tensor x_f32 = test::random_tensor(rows, f, 16);
  const Tensor x = bf16_of(x_f32);
  const Tensor wide = widened(x_f32);
  std::vector<GlobalId> ids(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<GlobalId>(7 * i + 3);
  const CounterRng rng(5, 2, 1, RngPurpose::Dropout);
  Tensor want(rows, f), got(rows, f);
  dropout_forward(want, wide, 0.3f, rng, ids);
  dropout_forward(got, x, 0.3f, rng, ids);
  EXPECT_EQ(0, std::memcmp(got.raw(), want.raw(), want.bytes()));
  const std::vector<NodeId> listed = {2099, 0, 1500, 1500, 7};
  Tensor gathered(5, f), gathered_wide(5, f);
  gather_rows(gathered, x, listed);
  gather_rows(gathered_wide, wide, listed);
  EXPECT_EQ(0, std::memcmp(gathered.raw(), gathered_wide.raw(), gathered_wide.bytes()));
  Tensor bf16_out(rows, f, DType::BF16);
  EXPECT_TRUE(throws_error([&] { dropout_forward(bf16_out, x, 0.3f, rng, ids); },
                           ErrorCategory::InvalidArgument, "y must be f32, found bf16"));
  EXPECT_TRUE(throws_error([&] { dropout_backward(want, x, 0.3f, rng, ids); },
                           ErrorCategory::InvalidArgument, "d_y must be f32, found bf16"));
}

// ---- axpy, column_sums ----

TEST(Axpy, AddsScaledInput) {
  for (std::int64_t f : test::kWidths) {
    const auto y0 = test::random_floats(static_cast<std::size_t>(13 * f), 1);
    const auto x = test::random_floats(y0.size(), 2);
    Tensor y = test::tensor_from(y0, 13, f);
    axpy(y, -0.75f, test::tensor_from(x, 13, f));
    std::vector<double> want(y0.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = y0[i] - 0.75 * x[i];
    // Two float roundings (product, sum) of values below 2 in magnitude.
    EXPECT_TRUE(test::near(test::values_of(y), want, 4 * kFloatEps, 0.0, f)) << "F = " << f;
  }
  Tensor y(2, 3), x(3, 2);
  EXPECT_TRUE(
      throws_error([&] { axpy(y, 1.0f, x); }, ErrorCategory::InvalidArgument, "x must be (2, 3)"));
}

TEST(ColumnSums, WritesOrAccumulatesAndIsThreadIndependent) {
  for (std::int64_t rows : {0, 1, 37, 5000}) {
    for (std::int64_t f : test::kWidths) {
      const auto x = test::random_floats(static_cast<std::size_t>(rows * f), 3);
      Tensor xt = test::tensor_from(x, rows, f);
      std::vector<double> want(static_cast<std::size_t>(f), 0.5);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k = 0; k < f; ++k)
          want[static_cast<std::size_t>(k)] += x[static_cast<std::size_t>(r * f + k)];
      }
      std::vector<float> out(static_cast<std::size_t>(f), 0.5f);
      column_sums(out, xt, /*accumulate=*/true);
      // Summed in double, then rounded twice to float (sum, then the accumulate).
      EXPECT_TRUE(test::near(out, want, 1e-9, 3 * kFloatEps, f)) << rows << " rows, F = " << f;
      std::vector<float> one(static_cast<std::size_t>(f), 7.0f), two = one;
      {
        test::ThreadCount threads(1);
        column_sums(one, xt, /*accumulate=*/false);
      }
      {
        test::ThreadCount threads(2);
        column_sums(two, xt, /*accumulate=*/false);
      }
      EXPECT_TRUE(test::bitwise_equal(two, one, f));
      if (rows == 0) {
        EXPECT_EQ(one[0], 0.0f);
      }
    }
  }
  std::vector<float> wrong(2);
  Tensor x(3, 4);
  EXPECT_TRUE(throws_error([&] { column_sums(wrong, x, false); }, ErrorCategory::InvalidArgument,
                           "out must have 4 entries, found 2"));
}

// ---- gather / scatter ----

TEST(Rows, GatherCopiesListedRows) {
  const std::vector<NodeId> rows = {4, 0, 4, 2};
  for (std::int64_t f : test::kWidths) {
    Tensor x = test::random_tensor(5, f, 6);
    Tensor out(4, f);
    gather_rows(out, x, rows);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::int64_t k = 0; k < f; ++k) {
        ASSERT_EQ(out.f32()[static_cast<std::int64_t>(i) * f + k], x.f32()[rows[i] * f + k]);
      }
    }
  }
  Tensor x(5, 3), out(0, 3), bad(2, 3);
  gather_rows(out, x, {});
  const std::vector<NodeId> outside = {1, 5};
  EXPECT_TRUE(throws_error([&] { gather_rows(bad, x, outside); }, ErrorCategory::InvalidArgument,
                           "rows[1] = 5 is outside [0, 5)"));
}

TEST(Rows, ScatterAddAccumulatesRepeatsInListOrder) {
  // Big lists with repeats so that the column-band parallel path runs for wide F.
  std::mt19937 gen(8);
  std::uniform_int_distribution<NodeId> pick(0, 99);
  std::vector<NodeId> rows(3000);
  for (NodeId& r : rows) r = pick(gen);
  for (std::int64_t f : test::kWidths) {
    const auto x = test::random_floats(static_cast<std::size_t>(3000 * f), 9);
    const auto out0 = test::random_floats(static_cast<std::size_t>(100 * f), 10);
    // The reference adds in list order in float, as the kernel promises: results are bitwise.
    std::vector<float> want = out0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::int64_t k = 0; k < f; ++k) {
        want[static_cast<std::size_t>(rows[i] * f + k)] +=
            x[i * static_cast<std::size_t>(f) + static_cast<std::size_t>(k)];
      }
    }
    for (int threads : {1, 2}) {
      test::ThreadCount count(threads);
      Tensor out = test::tensor_from(out0, 100, f);
      scatter_add_rows(out, test::tensor_from(x, 3000, f), rows);
      EXPECT_TRUE(test::bitwise_equal(test::values_of(out), want, f))
          << "F = " << f << ", threads " << threads;
    }
  }
  Tensor out(4, 2), x(3, 2);
  const std::vector<NodeId> two_rows = {0, 1};
  EXPECT_TRUE(throws_error([&] { scatter_add_rows(out, x, two_rows); },
                           ErrorCategory::InvalidArgument, "x must be (2, 2), found (3, 2)"));
}

TEST(Rows, ScatterWritesTheListedRowsOnly) {
  std::mt19937 gen(11);
  std::vector<NodeId> all(1000);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<NodeId>(i);
  std::shuffle(all.begin(), all.end(), gen);
  const std::vector<NodeId> rows(all.begin(), all.begin() + 700);  // distinct, in any order
  for (std::int64_t f : test::kWidths) {
    const auto x = test::random_floats(static_cast<std::size_t>(700 * f), 12);
    const auto out0 = test::random_floats(static_cast<std::size_t>(1000 * f), 13);
    std::vector<float> want = out0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::int64_t k = 0; k < f; ++k) {
        want[static_cast<std::size_t>(rows[i] * f + k)] =
            x[i * static_cast<std::size_t>(f) + static_cast<std::size_t>(k)];
      }
    }
    for (int threads : {1, 2}) {
      test::ThreadCount count(threads);
      Tensor out = test::tensor_from(out0, 1000, f);
      scatter_rows(out, test::tensor_from(x, 700, f), rows);
      EXPECT_TRUE(test::bitwise_equal(test::values_of(out), want, f))
          << "F = " << f << ", threads " << threads;
    }
  }
  Tensor out(4, 2), x(2, 2);
  const std::vector<NodeId> twice = {1, 1};
  EXPECT_TRUE(throws_error([&] { scatter_rows(out, x, twice); }, ErrorCategory::InvalidArgument,
                           "rows[1] = 1 is listed twice"));
}

// ---- threads ----

TEST(Threads, SetAndQuery) {
  const int saved = num_threads();
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(0);  // keeps the current setting
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(saved);
  EXPECT_EQ(num_threads(), saved);
}

}  // namespace
}  // namespace tessera
