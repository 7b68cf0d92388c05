// SPDX-License-Identifier: Apache-2.0
// CPU attention kernels of GAT (kernels.h, "attention"): the per-head projections, the fused
// score -> edge softmax -> weighted aggregation of a row (SDDMM, softmax and SpMM over the row's
// edges in one pass), its backward, and the transposed aggregation that carries the gradients
// back to the source rows. Rows run in parallel; every sum is taken in edge (or row-block)
// order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/kernels_cpu.h"
#include "core/cpu/parallel.h"

TESSERA_CPU_TARGET_BEGIN
namespace tessera::cpu::TESSERA_CPU_NS {
namespace {

inline float leaky_relu(float v, float slope) { return v > 0.0f ? v : slope * v; }

// Whether the attention dropout keeps head h of edge (row r, column c).
inline bool keeps(const AttentionDropoutArgs& drop, std::int64_t r, NodeId c, std::int64_t h,
                  std::int64_t heads) {
  const auto row_id = static_cast<std::uint64_t>(drop.column_ids[r]);
  const auto col_id = static_cast<std::uint64_t>(drop.column_ids[c]);
  return drop.rng->uniform(row_id, col_id * static_cast<std::uint64_t>(heads) +
                                       static_cast<std::uint64_t>(h)) >= drop.p;
}

// The weight head h of edge j (row r) aggregates with: alpha, dropped out.
inline float dropped(float alpha, const AttentionDropoutArgs& drop, std::int64_t r, NodeId c,
                     std::int64_t h, std::int64_t heads) {
  if (drop.p <= 0.0f) return alpha;
  return keeps(drop, r, c, h, heads) ? alpha / (1.0f - drop.p) : 0.0f;
}

}  // namespace

void gat_project(float* zs, float* s_dst, const float* z, const float* att, std::int64_t r,
                 std::int64_t heads, std::int64_t d) {
  const std::int64_t hd = heads * d;
  const float* att_src = att;
  const float* att_dst = att + hd;
#pragma omp parallel for schedule(static) if (r * hd >= detail::kParallelMinWork)
  for (std::int64_t row = 0; row < r; ++row) {
    const float* z_row = z + row * hd;
    float* out = zs + row * (hd + heads);
    std::copy(z_row, z_row + hd, out);
    for (std::int64_t h = 0; h < heads; ++h) {
      float src = 0.0f, dst = 0.0f;
      for (std::int64_t k = h * d; k < (h + 1) * d; ++k) {
        src += z_row[k] * att_src[k];
        dst += z_row[k] * att_dst[k];
      }
      out[hd + h] = src;
      s_dst[row * heads + h] = dst;
    }
  }
}

void gat_project_backward(float* d_z, float* d_att, const float* d_zs, const float* d_s_dst,
                          const float* zs, const float* att, std::int64_t r, std::int64_t heads,
                          std::int64_t d) {
  const std::int64_t hd = heads * d;
  const std::int64_t w = hd + heads;
  const float* att_src = att;
  const float* att_dst = att + hd;
  // d_att[0] += Σ_r d_s_src[r, h] z[r, h, :], d_att[1] += Σ_r d_s_dst[r, h] z[r, h, :]; d_z
  // written row by row in the same pass.
  std::vector<double> sums(static_cast<std::size_t>(2 * hd));
  detail::reduce_rows(sums.data(), 2 * hd, r, [&](double* acc, std::int64_t row) {
    const float* g = d_zs + row * w;
    const float* z_row = zs + row * w;
    float* out = d_z + row * hd;
    for (std::int64_t h = 0; h < heads; ++h) {
      const float g_src = g[hd + h];
      const float g_dst = d_s_dst[row * heads + h];
      for (std::int64_t k = h * d; k < (h + 1) * d; ++k) {
        out[k] = g[k] + g_src * att_src[k] + g_dst * att_dst[k];
        acc[k] += static_cast<double>(g_src) * z_row[k];
        acc[hd + k] += static_cast<double>(g_dst) * z_row[k];
      }
    }
  });
  for (std::int64_t k = 0; k < 2 * hd; ++k) d_att[k] += static_cast<float>(sums[k]);
}

void gat_attention_forward(float* out, float* alpha, const CsrView& a, const float* zs,
                           const float* s_dst, std::int64_t heads, std::int64_t d, float slope,
                           const AttentionDropoutArgs& drop, std::span<const NodeId> rows) {
  const std::int64_t hd = heads * d;
  const std::int64_t w = hd + heads;
  const auto count = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(dynamic, 64) if (count * hd >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < count; ++i) {
    const NodeId r = rows[static_cast<std::size_t>(i)];
    const EdgeOffset begin = a.indptr[r], end = a.indptr[r + 1];
    float* o = out + static_cast<std::int64_t>(r) * hd;
    std::fill(o, o + hd, 0.0f);
    if (begin == end) continue;
    const float* dst = s_dst + static_cast<std::int64_t>(r) * heads;
    for (std::int64_t h = 0; h < heads; ++h) {
      // Scores, then a max-subtracted softmax over the row's edges, in edge order.
      float top = -INFINITY;
      for (EdgeOffset j = begin; j < end; ++j) {
        const float e = leaky_relu(dst[h] + zs[std::int64_t{a.indices[j]} * w + hd + h], slope);
        alpha[j * heads + h] = e;
        top = std::max(top, e);
      }
      float sum = 0.0f;
      for (EdgeOffset j = begin; j < end; ++j) {
        const float e = std::exp(alpha[j * heads + h] - top);
        alpha[j * heads + h] = e;
        sum += e;
      }
      const float inv = 1.0f / sum;
      for (EdgeOffset j = begin; j < end; ++j) alpha[j * heads + h] *= inv;
    }
    for (EdgeOffset j = begin; j < end; ++j) {
      const NodeId c = a.indices[j];
      const float* z_row = zs + std::int64_t{c} * w;
      for (std::int64_t h = 0; h < heads; ++h) {
        const float weight = dropped(alpha[j * heads + h], drop, r, c, h, heads);
        if (weight == 0.0f) continue;
        for (std::int64_t k = h * d; k < (h + 1) * d; ++k) o[k] += weight * z_row[k];
      }
    }
  }
}

void gat_attention_backward(float* d_score, float* d_s_dst, float* alpha, const CsrView& a,
                            const float* d_out, const float* zs, const float* s_dst,
                            std::int64_t heads, std::int64_t d, float slope,
                            const AttentionDropoutArgs& drop, std::span<const NodeId> rows) {
  const std::int64_t hd = heads * d;
  const std::int64_t w = hd + heads;
  const auto count = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(dynamic, 64) if (count * hd >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < count; ++i) {
    const NodeId r = rows[static_cast<std::size_t>(i)];
    const EdgeOffset begin = a.indptr[r], end = a.indptr[r + 1];
    const float* g = d_out + static_cast<std::int64_t>(r) * hd;
    const float* dst = s_dst + static_cast<std::int64_t>(r) * heads;
    float* d_dst = d_s_dst + static_cast<std::int64_t>(r) * heads;
    for (std::int64_t h = 0; h < heads; ++h) {
      // d_alpha (into d_score) = <d_out[r, h], z[c, h]> through the dropout; then the softmax's
      // backward d_e = alpha (d_alpha - Σ alpha d_alpha) and LeakyReLU's.
      float dot = 0.0f;
      for (EdgeOffset j = begin; j < end; ++j) {
        const NodeId c = a.indices[j];
        const float* z_row = zs + std::int64_t{c} * w;
        float g_alpha = 0.0f;
        for (std::int64_t k = h * d; k < (h + 1) * d; ++k) g_alpha += g[k] * z_row[k];
        g_alpha = dropped(g_alpha, drop, r, c, h, heads);
        d_score[j * heads + h] = g_alpha;
        dot += alpha[j * heads + h] * g_alpha;
      }
      float sum = 0.0f;
      for (EdgeOffset j = begin; j < end; ++j) {
        const NodeId c = a.indices[j];
        const float al = alpha[j * heads + h];
        const float pre = dst[h] + zs[std::int64_t{c} * w + hd + h];
        const float d_e = al * (d_score[j * heads + h] - dot) * (pre > 0.0f ? 1.0f : slope);
        d_score[j * heads + h] = d_e;
        sum += d_e;
        alpha[j * heads + h] = dropped(al, drop, r, c, h, heads);
      }
      d_dst[h] = sum;
    }
  }
}

void gat_attention_transpose(float* d_zs, const CsrView& at, const EdgeOffset* edge_of,
                             const float* alpha, const float* d_score, const float* d_out,
                             std::int64_t heads, std::int64_t d, std::span<const NodeId> rows) {
  const std::int64_t hd = heads * d;
  const std::int64_t w = hd + heads;
  const auto count = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(dynamic, 64) if (count * hd >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < count; ++i) {
    const NodeId c = rows[static_cast<std::size_t>(i)];
    float* o = d_zs + static_cast<std::int64_t>(c) * w;
    std::fill(o, o + w, 0.0f);
    for (EdgeOffset k = at.indptr[c]; k < at.indptr[c + 1]; ++k) {
      const EdgeOffset j = edge_of[k];
      const float* g = d_out + std::int64_t{at.indices[k]} * hd;
      for (std::int64_t h = 0; h < heads; ++h) {
        o[hd + h] += d_score[j * heads + h];
        const float weight = alpha[j * heads + h];
        if (weight == 0.0f) continue;
        for (std::int64_t f = h * d; f < (h + 1) * d; ++f) o[f] += weight * g[f];
      }
    }
  }
}

}  // namespace tessera::cpu::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
