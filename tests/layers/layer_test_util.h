// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the layer tests: small random graphs (with a zero-degree node), random
// tensors, a counting Propagator wrapper, and a central-finite-difference gradient check that
// reports the largest error and where it is.
#pragma once

#include <gtest/gtest.h>
#include <cstdio>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/csr.h"
#include "core/kernels.h"
#include "core/tensor.h"
#include "layers/propagator.h"

namespace tessera::test {

inline Tensor random_tensor(std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                            float lo = -1.0f, float hi = 1.0f) {
  Tensor t(rows, cols);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(gen);
  return t;
}

inline std::vector<float> random_vector(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::span<float> span_of(Tensor& t) {
  return {t.f32(), static_cast<std::size_t>(t.numel())};
}
inline std::span<const float> span_of(const Tensor& t) {
  return {t.f32(), static_cast<std::size_t>(t.numel())};
}

// x (R, F) rounded to bf16 and widened back: the values a bf16 operand holds.
inline Tensor bf16_rounded(const Tensor& x) {
  Tensor bits(x.rows(), x.cols(), DType::BF16), out(x.rows(), x.cols());
  to_bf16(bits, x);
  to_f32(out, bits);
  return out;
}

// Hands every call to `inner` and records the dtype of the rows each call was given: whether a
// layer handed its rows over rounded (bf16) or left the rounding to the propagator (f32).
class RecordingPropagator final : public Propagator {
 public:
  explicit RecordingPropagator(Propagator& inner) : inner_(inner) {
    set_operand_dtype(inner.operand_dtype());
  }
  void forward(Tensor& out, const Tensor& x, int layer) override {
    forward_dtypes.push_back(x.dtype());
    inner_.forward(out, x, layer);
  }
  void backward(Tensor& d_x, const Tensor& d_out, int layer) override {
    backward_dtypes.push_back(d_out.dtype());
    inner_.backward(d_x, d_out, layer);
  }
  std::int64_t num_rows() const override { return inner_.num_rows(); }
  std::vector<DType> forward_dtypes, backward_dtypes;

 private:
  Propagator& inner_;
};

// Which values of out are > 0: the on/off state of a ReLU layer's units, for expect_gradient.
inline std::vector<bool> positive(const Tensor& out) {
  std::vector<bool> on(static_cast<std::size_t>(out.numel()));
  for (std::size_t i = 0; i < on.size(); ++i) on[i] = out.f32()[i] > 0.0f;
  return on;
}

// sum(out * r) in double: a loss whose gradient w.r.t. out is r.
inline double dot(const Tensor& out, const Tensor& r) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < out.numel(); ++i)
    sum += static_cast<double>(out.f32()[i]) * r.f32()[i];
  return sum;
}

// A directed edge list on n nodes without self loops or duplicates, in which node `isolated`
// has no edge at all (zero in- and out-degree) and node `source_only` has no in-edge.
struct EdgeList {
  std::int64_t num_nodes = 0;
  std::vector<GlobalId> src, dst;
};

inline EdgeList random_edges(std::int64_t n, std::uint32_t seed, NodeId isolated = 4,
                             NodeId source_only = 1) {
  EdgeList e;
  e.num_nodes = n;
  std::mt19937 gen(seed);
  std::bernoulli_distribution coin(0.3);
  for (NodeId v = 0; v < n; ++v)
    for (NodeId u = 0; u < n; ++u) {
      if (u == v || u == isolated || v == isolated || v == source_only) continue;
      if (coin(gen)) {
        e.src.push_back(u);
        e.dst.push_back(v);
      }
    }
  return e;
}

// A weighted, non-symmetric (N, N) CSR from an edge list (row = destination): random weights in
// [0.2, 1.2), so that A^T differs from A and backward must use the transpose.
inline Csr weighted_csr(const EdgeList& e, std::uint32_t seed) {
  std::vector<std::vector<NodeId>> in(static_cast<std::size_t>(e.num_nodes));
  for (std::size_t i = 0; i < e.src.size(); ++i)
    in[static_cast<std::size_t>(e.dst[i])].push_back(static_cast<NodeId>(e.src[i]));
  std::vector<EdgeOffset> indptr{0};
  std::vector<NodeId> indices;
  std::vector<float> values;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(0.2f, 1.2f);
  for (auto& row : in) {
    std::sort(row.begin(), row.end());
    for (NodeId u : row) {
      indices.push_back(u);
      values.push_back(dist(gen));
    }
    indptr.push_back(static_cast<EdgeOffset>(indices.size()));
  }
  return Csr(e.num_nodes, e.num_nodes, std::move(indptr), std::move(indices), std::move(values));
}

// Forwards to another propagator and counts the calls per layer tag.
class CountingPropagator final : public Propagator {
 public:
  explicit CountingPropagator(Propagator& inner) : inner_(inner) {}
  void forward(Tensor& out, const Tensor& x, int layer) override {
    ++forward_calls[layer];
    inner_.forward(out, x, layer);
  }
  void backward(Tensor& d_x, const Tensor& d_out, int layer) override {
    ++backward_calls[layer];
    inner_.backward(d_x, d_out, layer);
  }
  std::int64_t num_rows() const override { return inner_.num_rows(); }
  std::map<int, int> forward_calls, backward_calls;

 private:
  Propagator& inner_;
};

// Largest of |a - b| / max(1, |b|) over two arrays, and where it is; fails the test (naming
// `what`) when it exceeds tol.
inline void expect_close(std::span<const float> a, std::span<const float> b, double tol,
                         const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double worst = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(static_cast<double>(a[i]) - b[i]) /
                       std::max(1.0, std::abs(static_cast<double>(b[i])));
    if (!(err <= worst)) {  // also catches NaN
      worst = err;
      at = i;
      if (std::isnan(err)) break;
    }
  }
  EXPECT_LE(worst, tol) << what << ": largest error " << worst << " at flat index " << at
                        << " (got " << a[at] << ", expected " << b[at] << ")";
}

// Central finite differences of loss() w.r.t. every entry of `values` (perturbed in place and
// restored), compared with `analytic`: error = |fd - analytic| / max(1, |fd|) must be <= tol.
// `pattern` (optional) returns the on/off state of every ReLU. An entry whose +step and -step
// evaluations see different patterns straddles a kink: its step is divided by 4 (at most twice)
// and its tolerance multiplied by 4 (loss rounding grows as 1/step); an entry that still
// straddles one is skipped, and at most a quarter of the entries may be.
inline void expect_gradient(const std::string& what, std::span<float> values,
                            std::span<const float> analytic, const std::function<double()>& loss,
                            float eps, double tol,
                            const std::function<std::vector<bool>()>& pattern = {}) {
  ASSERT_EQ(values.size(), analytic.size()) << what;
  double worst = 0.0;  // error / tolerance of that entry
  double worst_err = 0.0, worst_fd = 0.0;
  std::size_t at = 0, skipped = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float saved = values[i];
    float step = eps;
    double entry_tol = tol;
    bool straddles = true;
    double fd = 0.0;
    for (int attempt = 0; attempt < 3 && straddles; ++attempt, step /= 4, entry_tol *= 4) {
      values[i] = saved + step;
      const float plus = values[i];
      const double loss_plus = loss();
      const std::vector<bool> pattern_plus = pattern ? pattern() : std::vector<bool>{};
      values[i] = saved - step;
      const float minus = values[i];
      const double loss_minus = loss();
      straddles = pattern && pattern() != pattern_plus;
      fd = (loss_plus - loss_minus) / (static_cast<double>(plus) - minus);
    }
    values[i] = saved;
    if (straddles) {
      ++skipped;
      continue;
    }
    entry_tol /= 4;  // undo the last increment of the loop
    const double err = std::abs(fd - analytic[i]) / std::max(1.0, std::abs(fd));
    if (!(err / entry_tol <= worst)) {  // also catches NaN
      worst = err / entry_tol;
      worst_err = err;
      at = i;
      worst_fd = fd;
      if (std::isnan(err)) break;
    }
  }
  EXPECT_LE(worst, 1.0) << what << ": largest error " << worst_err << " (" << worst
                        << " of its tolerance) at flat index " << at << " (analytic "
                        << analytic[at] << ", finite difference " << worst_fd << ")";
  EXPECT_LE(skipped * 4, values.size())
      << what << ": " << skipped << " of " << values.size() << " entries straddle a ReLU kink";
}

// The parameter of the per-layer tests (GCN, SAGE): widths and activation, and its test name.
constexpr std::int64_t kNodes = 9;  // node 4 has no edge at all, node 1 no in-edge

struct Case {
  std::int64_t f_in, f_out;
  Activation act;
};

inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "Fin" + std::to_string(info.param.f_in) + "_Fout" + std::to_string(info.param.f_out) +
         (info.param.act == Activation::Relu ? "_relu" : "_linear");
}

}  // namespace tessera::test
