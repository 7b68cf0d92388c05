// CPU fused elementwise kernels: bias + activation and inverted dropout, forward and backward.
// Outputs may alias inputs (each element is read before it is written). ReLU keeps NaN inputs
// NaN so that divergence is visible. The dropout mask is recomputed from CounterRng, never
// stored: one Philox block gives the draws of 4 features, and 8 blocks are drawn at once.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "engine/core/cpu/kernels_cpu.h"
#include "engine/core/cpu/parallel.h"

namespace tessera::cpu {
namespace {

inline float relu(float v) { return v < 0.0f ? 0.0f : v; }

// d_row (F) = d_y_row * act'(y_row).
inline void act_backward_row(float* d_row, const float* d_y_row, const float* y_row, Activation act,
                             std::int64_t f) {
  if (act == Activation::Relu) {
    for (std::int64_t k = 0; k < f; ++k) d_row[k] = y_row[k] > 0.0f ? d_y_row[k] : 0.0f;
  } else {
    for (std::int64_t k = 0; k < f; ++k) d_row[k] = d_y_row[k];
  }
}

// out_row[k] = keep ? in_row[k] * scale : 0 for the 4 * count features of `words` (count blocks
// of 4 words, the first at feature f0), keep = to_unit_float(word) >= p; at most `limit`.
inline void mask_features(float* out_row, const float* in_row, const std::uint32_t (*words)[4],
                          std::int64_t count, std::int64_t f0, std::int64_t limit, float p,
                          float scale) {
  const std::int64_t n = std::min<std::int64_t>(4 * count, limit - f0);
  for (std::int64_t k = 0; k < n; ++k) {
    // Branch-free (a random keep mispredicts half the time): dropped values become +0 through
    // a bit mask, so NaN or inf inputs are dropped too.
    const std::uint32_t keep_bits = to_unit_float(words[k >> 2][k & 3]) >= p ? ~0u : 0u;
    const std::uint32_t value = std::bit_cast<std::uint32_t>(in_row[f0 + k] * scale);
    out_row[f0 + k] = std::bit_cast<float>(value & keep_bits);
  }
}

// out (R, F) = keep ? in * scale : 0, keep = rng.uniform(global_ids[r], f) >= p: feature f uses
// word f % 4 of block f / 4. Blocks are drawn kLanes at a time (vectorised Philox), the tail
// one by one.
void apply_dropout_mask(float* out, const float* in, float p, const CounterRng& rng,
                        const GlobalId* global_ids, std::int64_t r, std::int64_t f) {
  constexpr int kLanes = 8;  // 32 features per batch
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork / 8)
  for (std::int64_t row = 0; row < r; ++row) {
    const auto id = static_cast<std::uint64_t>(global_ids[row]);
    const float* in_row = in + row * f;
    float* out_row = out + row * f;
    std::int64_t f0 = 0;
    std::uint32_t batch[kLanes][4];
    for (; f0 + 4 * kLanes <= f; f0 += 4 * kLanes) {
      rng.words_batch<kLanes>(id, static_cast<std::uint32_t>(f0 >> 2), batch);
      mask_features(out_row, in_row, batch, kLanes, f0, f, p, scale);
    }
    for (; f0 < f; f0 += 4) {
      const auto words = rng.words(id, static_cast<std::uint32_t>(f0 >> 2));
      const std::uint32_t block[1][4] = {{words[0], words[1], words[2], words[3]}};
      mask_features(out_row, in_row, block, 1, f0, f, p, scale);
    }
  }
}

void copy_if_distinct(float* out, const float* in, std::int64_t n) {
  if (out == in) return;
#pragma omp parallel for simd schedule(static) if (n >= detail::kParallelMinWork * 8)
  for (std::int64_t i = 0; i < n; ++i) out[i] = in[i];
}

}  // namespace

void bias_act_forward(float* y, const float* x, const float* bias, Activation act, std::int64_t r,
                      std::int64_t f) {
  const bool use_relu = act == Activation::Relu;
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork)
  for (std::int64_t row = 0; row < r; ++row) {
    const float* x_row = x + row * f;
    float* y_row = y + row * f;
    if (bias && use_relu) {
      for (std::int64_t k = 0; k < f; ++k) y_row[k] = relu(x_row[k] + bias[k]);
    } else if (bias) {
      for (std::int64_t k = 0; k < f; ++k) y_row[k] = x_row[k] + bias[k];
    } else if (use_relu) {
      for (std::int64_t k = 0; k < f; ++k) y_row[k] = relu(x_row[k]);
    } else if (y_row != x_row) {
      for (std::int64_t k = 0; k < f; ++k) y_row[k] = x_row[k];
    }
  }
}

void bias_act_backward(float* d_x, float* d_bias, const float* d_y, const float* y, Activation act,
                       std::int64_t r, std::int64_t f) {
  if (!d_bias) {
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork)
    for (std::int64_t row = 0; row < r; ++row) {
      act_backward_row(d_x + row * f, d_y + row * f, y + row * f, act, f);
    }
    return;
  }
  // Fused: each row's d_x is computed and added to its block's column sums in one pass.
  std::vector<double> sums(static_cast<std::size_t>(f));
  detail::reduce_rows(sums.data(), f, r, [&](double* acc, std::int64_t row) {
    float* d_row = d_x + row * f;
    act_backward_row(d_row, d_y + row * f, y + row * f, act, f);
    for (std::int64_t k = 0; k < f; ++k) acc[k] += d_row[k];
  });
  for (std::int64_t k = 0; k < f; ++k) d_bias[k] += static_cast<float>(sums[k]);
}

void dropout_forward(float* y, const float* x, float p, const CounterRng& rng,
                     const GlobalId* global_ids, std::int64_t r, std::int64_t f) {
  if (p == 0.0f) return copy_if_distinct(y, x, r * f);  // every draw is >= 0: all kept
  apply_dropout_mask(y, x, p, rng, global_ids, r, f);
}

void dropout_backward(float* d_x, const float* d_y, float p, const CounterRng& rng,
                      const GlobalId* global_ids, std::int64_t r, std::int64_t f) {
  if (p == 0.0f) return copy_if_distinct(d_x, d_y, r * f);
  apply_dropout_mask(d_x, d_y, p, rng, global_ids, r, f);
}

}  // namespace tessera::cpu
