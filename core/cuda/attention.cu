// SPDX-License-Identifier: Apache-2.0
// CUDA attention kernels of GAT, the twins of core/cpu/attention.cc: the per-head projections,
// the per-row score -> edge softmax -> weighted sum and its backward, and the transposed
// aggregation to the source rows. One thread per (listed row, head) walks the row's edges in
// order, so every sum runs in the CPU's order; the attention dropout draws the CPU's Philox words
// (philox.h). d_att is reduced through deterministic column sums.
#include "core/cuda/common.cuh"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/philox.h"

namespace tessera::cuda {
namespace {

using detail::blocks_for;
using detail::kThreads;

__device__ __forceinline__ float leaky_relu(float v, float slope) {
  return v > 0.0f ? v : slope * v;
}

// The weight head h of edge (r, c) aggregates with: alpha, dropped out as on the CPU.
__device__ __forceinline__ float dropped(float alpha, const AttentionDropoutArgs& drop,
                                         std::int64_t r, NodeId c, std::int64_t h,
                                         std::int64_t heads) {
  if (drop.p <= 0.0f) return alpha;
  const auto row_id = static_cast<std::uint64_t>(drop.column_ids[r]);
  const std::uint64_t index =
      static_cast<std::uint64_t>(drop.column_ids[c]) * static_cast<std::uint64_t>(heads) +
      static_cast<std::uint64_t>(h);
  const PhiloxWords words = philox_words(drop.key, row_id, static_cast<std::uint32_t>(index >> 2));
  const float unit = static_cast<float>(words.w[index & 3] >> 8) * (1.0f / 16777216.0f);
  return unit >= drop.p ? alpha / (1.0f - drop.p) : 0.0f;
}

__global__ void project_kernel(float* zs, float* s_dst, const float* z, const float* att,
                               std::int64_t r, std::int64_t heads, std::int64_t d) {
  const std::int64_t hd = heads * d;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < r * heads;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t row = t / heads, h = t % heads;
    const float* z_row = z + row * hd;
    float* out = zs + row * (hd + heads);
    float src = 0.0f, dst = 0.0f;
    for (std::int64_t k = h * d; k < (h + 1) * d; ++k) {
      out[k] = z_row[k];
      src += z_row[k] * att[k];
      dst += z_row[k] * att[hd + k];
    }
    out[hd + h] = src;
    s_dst[row * heads + h] = dst;
  }
}

// d_z (R, HD) written; terms (R, 2 HD) = [d_s_src z, d_s_dst z] per row, for d_att's column sums.
__global__ void project_backward_kernel(float* d_z, float* terms, const float* d_zs,
                                        const float* d_s_dst, const float* zs, const float* att,
                                        std::int64_t r, std::int64_t heads, std::int64_t d) {
  const std::int64_t hd = heads * d, w = hd + heads;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < r * heads;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t row = t / heads, h = t % heads;
    const float* g = d_zs + row * w;
    const float* z_row = zs + row * w;
    const float g_src = g[hd + h];
    const float g_dst = d_s_dst[row * heads + h];
    for (std::int64_t k = h * d; k < (h + 1) * d; ++k) {
      d_z[row * hd + k] = g[k] + g_src * att[k] + g_dst * att[hd + k];
      terms[row * 2 * hd + k] = g_src * z_row[k];
      terms[row * 2 * hd + hd + k] = g_dst * z_row[k];
    }
  }
}

__global__ void attention_forward_kernel(float* out, float* alpha, const EdgeOffset* indptr,
                                         const NodeId* indices, const float* zs,
                                         const float* s_dst, std::int64_t heads, std::int64_t d,
                                         float slope, AttentionDropoutArgs drop,
                                         const NodeId* rows, std::int64_t count) {
  const std::int64_t hd = heads * d, w = hd + heads;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < count * heads;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const NodeId r = rows[t / heads];
    const std::int64_t h = t % heads;
    const EdgeOffset begin = indptr[r], end = indptr[r + 1];
    float* o = out + static_cast<std::int64_t>(r) * hd;
    for (std::int64_t k = h * d; k < (h + 1) * d; ++k) o[k] = 0.0f;
    if (begin == end) continue;
    const float dst = s_dst[static_cast<std::int64_t>(r) * heads + h];
    float top = -INFINITY;
    for (EdgeOffset j = begin; j < end; ++j) {
      const float e = leaky_relu(dst + zs[std::int64_t{indices[j]} * w + hd + h], slope);
      alpha[j * heads + h] = e;
      top = fmaxf(top, e);
    }
    float sum = 0.0f;
    for (EdgeOffset j = begin; j < end; ++j) {
      const float e = expf(alpha[j * heads + h] - top);
      alpha[j * heads + h] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (EdgeOffset j = begin; j < end; ++j) alpha[j * heads + h] *= inv;
    for (EdgeOffset j = begin; j < end; ++j) {
      const NodeId c = indices[j];
      const float weight = dropped(alpha[j * heads + h], drop, r, c, h, heads);
      if (weight == 0.0f) continue;
      const float* z_row = zs + std::int64_t{c} * w;
      for (std::int64_t k = h * d; k < (h + 1) * d; ++k) o[k] += weight * z_row[k];
    }
  }
}

__global__ void attention_backward_kernel(float* d_score, float* d_s_dst, float* alpha,
                                          const EdgeOffset* indptr, const NodeId* indices,
                                          const float* d_out, const float* zs, const float* s_dst,
                                          std::int64_t heads, std::int64_t d, float slope,
                                          AttentionDropoutArgs drop, const NodeId* rows,
                                          std::int64_t count) {
  const std::int64_t hd = heads * d, w = hd + heads;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < count * heads;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const NodeId r = rows[t / heads];
    const std::int64_t h = t % heads;
    const EdgeOffset begin = indptr[r], end = indptr[r + 1];
    const float* g = d_out + static_cast<std::int64_t>(r) * hd;
    const float dst = s_dst[static_cast<std::int64_t>(r) * heads + h];
    float dot = 0.0f;
    for (EdgeOffset j = begin; j < end; ++j) {
      const NodeId c = indices[j];
      const float* z_row = zs + std::int64_t{c} * w;
      float g_alpha = 0.0f;
      for (std::int64_t k = h * d; k < (h + 1) * d; ++k) g_alpha += g[k] * z_row[k];
      g_alpha = dropped(g_alpha, drop, r, c, h, heads);
      d_score[j * heads + h] = g_alpha;
      dot += alpha[j * heads + h] * g_alpha;
    }
    float sum = 0.0f;
    for (EdgeOffset j = begin; j < end; ++j) {
      const NodeId c = indices[j];
      const float al = alpha[j * heads + h];
      const float pre = dst + zs[std::int64_t{c} * w + hd + h];
      const float d_e = al * (d_score[j * heads + h] - dot) * (pre > 0.0f ? 1.0f : slope);
      d_score[j * heads + h] = d_e;
      sum += d_e;
      alpha[j * heads + h] = dropped(al, drop, r, c, h, heads);
    }
    d_s_dst[static_cast<std::int64_t>(r) * heads + h] = sum;
  }
}

__global__ void attention_transpose_kernel(float* d_zs, const EdgeOffset* indptr,
                                           const NodeId* indices, const EdgeOffset* edge_of,
                                           const float* alpha, const float* d_score,
                                           const float* d_out, std::int64_t heads, std::int64_t d,
                                           const NodeId* rows, std::int64_t count) {
  const std::int64_t hd = heads * d, w = hd + heads;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < count * heads;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const NodeId c = rows[t / heads];
    const std::int64_t h = t % heads;
    float* o = d_zs + static_cast<std::int64_t>(c) * w;
    float score = 0.0f;
    for (std::int64_t f = h * d; f < (h + 1) * d; ++f) o[f] = 0.0f;
    for (EdgeOffset k = indptr[c]; k < indptr[c + 1]; ++k) {
      const EdgeOffset j = edge_of[k];
      score += d_score[j * heads + h];
      const float weight = alpha[j * heads + h];
      if (weight == 0.0f) continue;
      const float* g = d_out + std::int64_t{indices[k]} * hd;
      for (std::int64_t f = h * d; f < (h + 1) * d; ++f) o[f] += weight * g[f];
    }
    o[hd + h] = score;
  }
}

}  // namespace

void gat_project(float* zs, float* s_dst, const float* z, const float* att, std::int64_t r,
                 std::int64_t heads, std::int64_t d) {
  if (r * heads == 0) return;
  project_kernel<<<blocks_for(r * heads), kThreads, 0, compute_stream()>>>(zs, s_dst, z, att, r,
                                                                           heads, d);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void gat_project_backward(float* d_z, float* d_att, const float* d_zs, const float* d_s_dst,
                          const float* zs, const float* att, std::int64_t r, std::int64_t heads,
                          std::int64_t d) {
  if (r * heads == 0) return;
  const std::int64_t hd = heads * d;
  DeviceBuffer terms(static_cast<std::size_t>(r * 2 * hd) * sizeof(float));  // (R, 2 HD)
  project_backward_kernel<<<blocks_for(r * heads), kThreads, 0, compute_stream()>>>(
      d_z, terms.as<float>(), d_zs, d_s_dst, zs, att, r, heads, d);
  TESSERA_CUDA_CHECK_LAUNCH();
  column_sums(d_att, terms.as<float>(), /*accumulate=*/true, r, 2 * hd);
}

void gat_attention_forward(float* out, float* alpha, const CudaCsrArrays& a, const float* zs,
                           const float* s_dst, std::int64_t heads, std::int64_t d, float slope,
                           const AttentionDropoutArgs& drop, const NodeId* rows,
                           std::int64_t count) {
  if (count * heads == 0) return;
  attention_forward_kernel<<<blocks_for(count * heads), kThreads, 0, compute_stream()>>>(
      out, alpha, a.indptr, a.indices, zs, s_dst, heads, d, slope, drop, rows, count);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void gat_attention_backward(float* d_score, float* d_s_dst, float* alpha, const CudaCsrArrays& a,
                            const float* d_out, const float* zs, const float* s_dst,
                            std::int64_t heads, std::int64_t d, float slope,
                            const AttentionDropoutArgs& drop, const NodeId* rows,
                            std::int64_t count) {
  if (count * heads == 0) return;
  attention_backward_kernel<<<blocks_for(count * heads), kThreads, 0, compute_stream()>>>(
      d_score, d_s_dst, alpha, a.indptr, a.indices, d_out, zs, s_dst, heads, d, slope, drop, rows,
      count);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void gat_attention_transpose(float* d_zs, const CudaCsrArrays& at, const EdgeOffset* edge_of,
                             const float* alpha, const float* d_score, const float* d_out,
                             std::int64_t heads, std::int64_t d, const NodeId* rows,
                             std::int64_t count) {
  if (count * heads == 0) return;
  attention_transpose_kernel<<<blocks_for(count * heads), kThreads, 0, compute_stream()>>>(
      d_zs, at.indptr, at.indices, edge_of, alpha, d_score, d_out, heads, d, rows, count);
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace tessera::cuda
