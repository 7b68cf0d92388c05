// SPDX-License-Identifier: Apache-2.0
// The GAT attention kernels against a plain double-precision reference of GAT's formulas
// (per-head projections; LeakyReLU scores, edge softmax, attention dropout, weighted sum): the
// forward against the reference's values, and the backward (gat_project_backward,
// gat_attention_backward and gat_attention_transpose together) against central finite
// differences of the reference's loss <G, out>. Also: rows split in two calls equal one call,
// results do not depend on the thread count, and bad shapes are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "core/kernels.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::random_floats;
using test::random_tensor;
using test::values_of;

constexpr float kSlope = 0.2f;

// Head h of edge (r, c) is kept by the attention dropout (the documented key).
bool kept(const CounterRng& rng, float p, GlobalId row_id, GlobalId col_id, int h, int heads) {
  return rng.uniform(static_cast<std::uint64_t>(row_id),
                     static_cast<std::uint64_t>(col_id) * heads + h) >= p;
}

// The problem: a pattern A (R, C), C >= R (the first R columns are the rows), heads H of
// width D, z (C, HD) and att (2, HD) as the variables; G (R, HD) the loss weights.
struct Problem {
  Csr a;
  int heads;
  std::int64_t d;
  std::vector<double> z, att;  // (C, HD), (2, HD)
  std::vector<float> g;        // (R, HD)
  std::vector<GlobalId> ids;   // (C)
  float p;
  CounterRng rng{5, 3, 1, RngPurpose::AttentionDropout};

  std::int64_t hd() const { return heads * d; }

  // out (R, HD) of GAT's formulas in double.
  std::vector<double> forward() const {
    const std::int64_t rows = a.num_rows(), cols = a.num_cols();
    std::vector<double> s_src(static_cast<std::size_t>(cols * heads)),
        s_dst(static_cast<std::size_t>(rows * heads), 0.0);
    for (std::int64_t v = 0; v < cols; ++v)
      for (int h = 0; h < heads; ++h)
        for (std::int64_t k = h * d; k < (h + 1) * d; ++k) {
          s_src[v * heads + h] += z[v * hd() + k] * att[k];
          if (v < rows) s_dst[v * heads + h] += z[v * hd() + k] * att[hd() + k];
        }
    std::vector<double> out(static_cast<std::size_t>(rows * hd()), 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (int h = 0; h < heads; ++h) {
        std::vector<double> e;
        for (EdgeOffset j = a.indptr()[r]; j < a.indptr()[r + 1]; ++j) {
          const double pre = s_dst[r * heads + h] + s_src[a.indices()[j] * heads + h];
          e.push_back(pre > 0 ? pre : kSlope * pre);
        }
        if (e.empty()) continue;
        const double top = *std::max_element(e.begin(), e.end());
        double sum = 0;
        for (double& v : e) sum += (v = std::exp(v - top));
        for (EdgeOffset j = a.indptr()[r]; j < a.indptr()[r + 1]; ++j) {
          const NodeId c = a.indices()[j];
          double w = e[static_cast<std::size_t>(j - a.indptr()[r])] / sum;
          if (p > 0) w = kept(rng, p, ids[r], ids[c], h, heads) ? w / (1.0 - p) : 0.0;
          for (std::int64_t k = h * d; k < (h + 1) * d; ++k)
            out[r * hd() + k] += w * z[c * hd() + k];
        }
      }
    }
    return out;
  }
  double loss() const {
    const std::vector<double> out = forward();
    double l = 0;
    for (std::size_t i = 0; i < out.size(); ++i) l += out[i] * g[i];
    return l;
  }
};

Problem make_problem(std::int64_t rows, std::int64_t halo, int heads, std::int64_t d, float p,
                     std::uint32_t seed) {
  Problem pr;
  pr.a = test::random_csr(rows, rows + halo, seed, false, 6, 40).with_self_loops();
  pr.heads = heads;
  pr.d = d;
  pr.p = p;
  const std::int64_t cols = rows + halo;
  for (float v : random_floats(static_cast<std::size_t>(cols * heads * d), seed + 1))
    pr.z.push_back(v);
  for (float v : random_floats(static_cast<std::size_t>(2 * heads * d), seed + 2, -2.0f, 2.0f))
    pr.att.push_back(v);
  pr.g = random_floats(static_cast<std::size_t>(rows * heads * d), seed + 3);
  for (std::int64_t v = 0; v < cols; ++v) pr.ids.push_back(1000 + 13 * v);
  return pr;
}

// The kernels' forward and backward on a problem.
struct KernelRun {
  Tensor zs, s_dst, out, alpha;
  Tensor d_z, d_zs, d_score, d_s_dst;
  std::vector<float> d_att;

  explicit KernelRun(const Problem& pr, bool split_rows = false) {
    const std::int64_t rows = pr.a.num_rows(), cols = pr.a.num_cols(), hd = pr.hd();
    const int heads = pr.heads;
    std::vector<float> zf(pr.z.begin(), pr.z.end()), att(pr.att.begin(), pr.att.end());
    const Tensor z = test::tensor_from(zf, cols, hd);
    zs.resize(cols, hd + heads);
    Tensor s_all(cols, heads);  // the kernel projects every column; the rows' s_dst is kept
    gat_project(zs, s_all, z, att, heads);
    s_dst.resize(rows, heads);
    std::copy_n(s_all.f32(), rows * heads, s_dst.f32());
    std::vector<NodeId> all(static_cast<std::size_t>(rows));
    std::iota(all.begin(), all.end(), NodeId{0});
    const AttentionDropout drop{pr.p, &pr.rng, pr.ids};
    out.resize(rows, hd);
    alpha.resize(pr.a.nnz(), heads);
    const std::span<const NodeId> span(all);
    const auto each = [&](auto f) {
      if (!split_rows) return f(span);
      f(span.subspan(0, span.size() / 3));
      f(span.subspan(span.size() / 3));
    };
    each([&](std::span<const NodeId> r) {
      gat_attention_forward(out, alpha, pr.a.view(), zs, s_dst, heads, kSlope, drop, r);
    });
    const Tensor g = test::tensor_from(pr.g, rows, hd);
    d_score.resize(pr.a.nnz(), heads);
    d_s_dst.resize(rows, heads);
    each([&](std::span<const NodeId> r) {
      gat_attention_backward(d_score, d_s_dst, alpha, pr.a.view(), g, zs, s_dst, heads, kSlope,
                             drop, r);
    });
    // A^T with the edge map, as the GAT layer builds it.
    const Csr& a = pr.a;
    std::vector<EdgeOffset> ptr(static_cast<std::size_t>(cols) + 1, 0), edge_of(a.nnz());
    for (NodeId c : a.indices()) ++ptr[static_cast<std::size_t>(c) + 1];
    std::partial_sum(ptr.begin(), ptr.end(), ptr.begin());
    std::vector<EdgeOffset> next(ptr.begin(), ptr.end() - 1);
    std::vector<NodeId> idx(static_cast<std::size_t>(a.nnz()));
    for (NodeId r = 0; r < rows; ++r)
      for (EdgeOffset j = a.indptr()[r]; j < a.indptr()[r + 1]; ++j) {
        const EdgeOffset k = next[static_cast<std::size_t>(a.indices()[j])]++;
        idx[static_cast<std::size_t>(k)] = r;
        edge_of[static_cast<std::size_t>(k)] = j;
      }
    const Csr at(cols, rows, ptr, idx);
    std::vector<NodeId> all_cols(static_cast<std::size_t>(cols));
    std::iota(all_cols.begin(), all_cols.end(), NodeId{0});
    d_zs.resize(cols, hd + heads);
    gat_attention_transpose(d_zs, at.view(), edge_of, alpha, d_score, g, heads, all_cols);
    // Every column's gradient through its projections (d_s_dst zero beyond the rows).
    Tensor d_s_all = Tensor::zeros(cols, heads);
    std::copy_n(d_s_dst.f32(), rows * heads, d_s_all.f32());
    d_z.resize(cols, hd);
    d_att.assign(static_cast<std::size_t>(2 * hd), 0.0f);
    gat_project_backward(d_z, d_att, d_zs, d_s_all, zs, att, heads);
  }
};

TEST(AttentionKernels, ForwardMatchesTheFormulas) {
  for (const float p : {0.0f, 0.4f}) {
    for (const auto& [heads, d] : {std::pair{1, 5}, std::pair{3, 4}, std::pair{8, 8}}) {
      const Problem pr = make_problem(60, 15, heads, d, p, 7);
      const KernelRun run(pr);
      EXPECT_TRUE(test::near(values_of(run.out), pr.forward(), 1e-5, 1e-5, pr.hd()))
          << heads << " heads of " << d << ", dropout " << p;
    }
  }
}

TEST(AttentionKernels, BackwardMatchesFiniteDifferencesOfTheFormulas) {
  for (const float p : {0.0f, 0.4f}) {
    Problem pr = make_problem(40, 12, 3, 4, p, 11);
    const KernelRun run(pr);
    // Central differences of the double reference (step 1e-6: a LeakyReLU kink inside a step
    // is improbable); the kernels' gradients are float.
    const auto check = [&](std::vector<double>& values, std::span<const float> analytic,
                           const char* what) {
      ASSERT_EQ(values.size(), analytic.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        const double saved = values[i];
        values[i] = saved + 1e-6;
        const double plus = pr.loss();
        values[i] = saved - 1e-6;
        const double minus = pr.loss();
        values[i] = saved;
        const double fd = (plus - minus) / 2e-6;
        EXPECT_NEAR(analytic[i], fd, 1e-4 * std::max(1.0, std::abs(fd)))
            << what << "[" << i << "], dropout " << p;
      }
    };
    check(pr.z, values_of(run.d_z), "d_z");
    check(pr.att, run.d_att, "d_att");
  }
}

TEST(AttentionKernels, RowsInTwoCallsAndAnyThreadCountGiveTheSameBits) {
  const Problem pr = make_problem(300, 40, 4, 9, 0.3f, 19);
  const KernelRun one(pr);
  const KernelRun split(pr, /*split_rows=*/true);
  std::vector<float> at_one_thread;
  {
    test::ThreadCount threads(1);
    const KernelRun serial(pr);
    EXPECT_TRUE(test::bitwise_equal(values_of(serial.out), values_of(one.out), pr.hd()));
    EXPECT_TRUE(test::bitwise_equal(values_of(serial.d_z), values_of(one.d_z), pr.hd()));
    EXPECT_TRUE(test::bitwise_equal(serial.d_att, one.d_att, pr.hd()));
  }
  EXPECT_TRUE(test::bitwise_equal(values_of(split.out), values_of(one.out), pr.hd()));
  EXPECT_TRUE(test::bitwise_equal(values_of(split.d_z), values_of(one.d_z), pr.hd()));
}

TEST(AttentionKernels, RefuseBadShapes) {
  const Problem pr = make_problem(10, 2, 2, 3, 0.0f, 3);
  KernelRun run(pr);
  std::vector<NodeId> rows = {0, 1, 2};
  Tensor wrong(10, 5);
  EXPECT_THROW(
      gat_attention_forward(wrong, run.alpha, pr.a.view(), run.zs, run.s_dst, 2, kSlope, {}, rows),
      Error);  // out must be (10, 6)
  EXPECT_THROW(gat_attention_forward(run.out, run.alpha, pr.a.view(), run.zs, run.s_dst, 4, kSlope,
                                     {}, rows),
               Error);  // zs (12, 8) is not 4 heads
  rows = {0, 0};
  EXPECT_THROW(gat_attention_forward(run.out, run.alpha, pr.a.view(), run.zs, run.s_dst, 2, kSlope,
                                     {}, rows),
               Error);  // a row twice
  rows = {0};
  const AttentionDropout no_ids{0.5f, &pr.rng, {}};
  EXPECT_THROW(gat_attention_forward(run.out, run.alpha, pr.a.view(), run.zs, run.s_dst, 2, kSlope,
                                     no_ids, rows),
               Error);  // dropout keys missing
  std::vector<float> short_att(5);
  EXPECT_THROW(gat_project(run.zs, run.s_dst, run.d_z, short_att, 2), Error);
}

}  // namespace
}  // namespace tessera
