// SPDX-License-Identifier: Apache-2.0
// A GAT attention problem for the kernel tests: a pattern with halo columns, heads, the
// variables z and att in double with GAT's formulas as the reference (forward and the loss
// <G, out>), and KernelRun, the kernels' forward and backward on it on a device
// (tests/core/test_attention_kernels.cc on the CPU, tests/cuda/test_cuda_attention.cc on a GPU
// against the CPU).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <vector>

#include "core/kernels.h"
#include "tests/core/test_util.h"

namespace tessera::test {

constexpr float kSlope = 0.2f;

// Head h of edge (r, c) is kept by the attention dropout (the documented key).
inline bool kept(const CounterRng& rng, float p, GlobalId row_id, GlobalId col_id, int h, int heads) {
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

inline Problem make_problem(std::int64_t rows, std::int64_t halo, int heads, std::int64_t d, float p,
                     std::uint32_t seed) {
  Problem pr;
  pr.a = test::random_csr(rows, rows + halo, seed, false, 6, 40).with_self_loops();
  pr.heads = heads;
  pr.d = d;
  pr.p = p;
  const std::int64_t cols = rows + halo;
  for (float v : test::random_floats(static_cast<std::size_t>(cols * heads * d), seed + 1))
    pr.z.push_back(v);
  for (float v : test::random_floats(static_cast<std::size_t>(2 * heads * d), seed + 2, -2.0f, 2.0f))
    pr.att.push_back(v);
  pr.g = test::random_floats(static_cast<std::size_t>(rows * heads * d), seed + 3);
  for (std::int64_t v = 0; v < cols; ++v) pr.ids.push_back(1000 + 13 * v);
  return pr;
}

// The kernels' forward and backward on a problem, with every tensor on `device` (the index
// lists and the attention vectors stay on the host: the kernels stage them).
struct KernelRun {
  Tensor zs, s_dst, out, alpha;
  Tensor d_z, d_zs, d_score, d_s_dst;
  std::vector<float> d_att;

  explicit KernelRun(const Problem& pr, bool split_rows = false, Device device = Device::cpu()) {
    const std::int64_t rows = pr.a.num_rows(), cols = pr.a.num_cols(), hd = pr.hd();
    const int heads = pr.heads;
    const Device host = Device::cpu();
    std::vector<float> zf(pr.z.begin(), pr.z.end()), att(pr.att.begin(), pr.att.end());
    const Tensor z = test::tensor_from(zf, cols, hd).to(device);
    zs.resize(cols, hd + heads, device);
    Tensor s_all(cols, heads, DType::F32, device);  // every column projected; the rows' kept
    gat_project(zs, s_all, z, att, heads);
    s_dst = Tensor(rows, heads);
    std::copy_n(s_all.to(host).f32(), rows * heads, s_dst.f32());
    s_dst = s_dst.to(device);
    std::vector<NodeId> all(static_cast<std::size_t>(rows));
    std::iota(all.begin(), all.end(), NodeId{0});
    const AttentionDropout drop{pr.p, &pr.rng, pr.ids};
    out.resize(rows, hd, device);
    alpha.resize(pr.a.nnz(), heads, device);
    const std::span<const NodeId> span(all);
    const auto each = [&](auto f) {
      if (!split_rows) return f(span);
      f(span.subspan(0, span.size() / 3));
      f(span.subspan(span.size() / 3));
    };
    each([&](std::span<const NodeId> r) {
      gat_attention_forward(out, alpha, pr.a.view(), zs, s_dst, heads, kSlope, drop, r);
    });
    const Tensor g = test::tensor_from(pr.g, rows, hd).to(device);
    d_score.resize(pr.a.nnz(), heads, device);
    d_s_dst.resize(rows, heads, device);
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
    d_zs.resize(cols, hd + heads, device);
    gat_attention_transpose(d_zs, at.view(), edge_of, alpha, d_score, g, heads, all_cols);
    // Every column's gradient through its projections (d_s_dst zero beyond the rows).
    Tensor d_s_all = Tensor::zeros(cols, heads);
    std::copy_n(d_s_dst.to(host).f32(), rows * heads, d_s_all.f32());
    d_z.resize(cols, hd, device);
    d_att.assign(static_cast<std::size_t>(2 * hd), 0.0f);
    gat_project_backward(d_z, d_att, d_zs, d_s_all.to(device), zs, att, heads);
  }
};

}  // namespace tessera::test
