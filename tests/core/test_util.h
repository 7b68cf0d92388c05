// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the core tests: seeded random data, tensors from vectors, a random sparse
// matrix with zero-degree and hub rows, a thread-count guard, and comparisons that on failure
// report the largest error and the first mismatching (row, col).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <sstream>
#include <vector>

#include "core/csr.h"
#include "core/error.h"
#include "core/kernels.h"
#include "core/tensor.h"

namespace tessera::test {

// The feature widths every kernel is tested over: 1, odd widths around the SIMD and
// specialisation boundaries (7/8/9, 31/32/33) and a wide one.
inline const std::vector<std::int64_t> kWidths = {1, 2, 4, 7, 8, 9, 16, 31, 32, 33, 103, 257};

// Unit roundoff of float: the relative error of one rounded operation.
inline constexpr double kFloatEps = 1.0 / (1 << 24);

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = dist(gen);
  return out;
}

inline Tensor tensor_from(const std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
  Tensor t(rows, cols);
  if (!values.empty()) std::memcpy(t.f32(), values.data(), values.size() * sizeof(float));
  return t;
}

inline Tensor random_tensor(std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                            float lo = -1.0f, float hi = 1.0f) {
  return tensor_from(random_floats(static_cast<std::size_t>(rows * cols), seed, lo, hi), rows,
                     cols);
}

inline std::vector<float> values_of(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  if (!out.empty()) std::memcpy(out.data(), t.f32(), out.size() * sizeof(float));
  return out;
}

inline std::string at_string(std::size_t i, std::int64_t cols) {
  std::ostringstream os;
  const auto c = static_cast<std::size_t>(std::max<std::int64_t>(cols, 1));
  os << "(" << i / c << ", " << i % c << ")";
  return os.str();
}

// |got[i] - want[i]| <= tol[i] for every i; tol.size() == 1 applies one tolerance to all.
inline ::testing::AssertionResult near_each(std::span<const float> got,
                                            std::span<const double> want,
                                            std::span<const double> tol, std::int64_t cols) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size differs: got " << got.size() << ", want " << want.size();
  }
  std::size_t bad = 0, first = 0, worst = 0;
  double worst_err = -1.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    const double t = tol[tol.size() == 1 ? 0 : i];
    const bool ok = err <= t || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!ok && bad++ == 0) first = i;
    if (!ok && (err > worst_err || std::isnan(err))) {
      worst_err = err;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const double first_tol = tol[tol.size() == 1 ? 0 : first];
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " values off; largest error " << worst_err << " at "
         << at_string(worst, cols) << " (got " << got[worst] << ", want " << want[worst]
         << "); first mismatch at " << at_string(first, cols) << " (got " << got[first] << ", want "
         << want[first] << ", tolerance " << first_tol << ")";
}

// |got - want| <= atol + rtol * |want| element-wise.
inline ::testing::AssertionResult near(std::span<const float> got, std::span<const double> want,
                                       double atol, double rtol, std::int64_t cols) {
  std::vector<double> tol(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) tol[i] = atol + rtol * std::abs(want[i]);
  return near_each(got, want, tol, cols);
}

inline ::testing::AssertionResult bitwise_equal(std::span<const float> got,
                                                std::span<const float> want, std::int64_t cols) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size differs: got " << got.size() << ", want " << want.size();
  }
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ == 0) first = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " values differ bitwise; first at "
         << at_string(first, cols) << " (got " << got[first] << ", want " << want[first] << ")";
}

// Runs the block with a given OpenMP/BLAS thread count, restoring the previous one afterwards.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : saved_(num_threads()) { set_num_threads(threads); }
  ~ThreadCount() { set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

// A random (rows, cols) CSR: rows 4, 9, 14, ... empty, row 1 a hub of `hub_degree` entries,
// others 1..max_degree entries (repeats possible); weights in [0, 1) when with_values.
inline Csr random_csr(std::int64_t rows, std::int64_t cols, std::uint32_t seed, bool with_values,
                      int max_degree = 12, int hub_degree = 300) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<NodeId> col(
      0, static_cast<NodeId>(std::max<std::int64_t>(cols, 1) - 1));
  std::uniform_int_distribution<int> deg(1, max_degree);
  std::uniform_real_distribution<float> weight(0.0f, 1.0f);
  std::vector<EdgeOffset> indptr(static_cast<std::size_t>(rows) + 1, 0);
  std::vector<NodeId> indices;
  std::vector<float> values;
  for (std::int64_t r = 0; r < rows; ++r) {
    int d = r % 5 == 4 || cols == 0 ? 0 : (r == 1 ? hub_degree : deg(gen));
    for (int j = 0; j < d; ++j) {
      indices.push_back(col(gen));
      if (with_values) values.push_back(weight(gen));
    }
    indptr[static_cast<std::size_t>(r) + 1] = static_cast<EdgeOffset>(indices.size());
  }
  return Csr(rows, cols, std::move(indptr), std::move(indices), std::move(values));
}

// Expects `body` to throw tessera::Error of `category` whose message contains `fragment`.
template <class Body>
::testing::AssertionResult throws_error(Body&& body, ErrorCategory category,
                                        const std::string& fragment = "") {
  try {
    body();
  } catch (const Error& e) {
    if (e.category() != category) {
      return ::testing::AssertionFailure()
             << "threw category " << to_string(e.category()) << " instead of "
             << to_string(category) << ": " << e.what();
    }
    if (e.message().find(fragment) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message \"" << e.message() << "\" lacks \"" << fragment << "\"";
    }
    return ::testing::AssertionSuccess() << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace tessera::test
