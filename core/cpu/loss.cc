// SPDX-License-Identifier: Apache-2.0
// CPU losses: row-wise log-softmax with NLL (single-label), and sigmoid binary cross-entropy
// computed from logits in the stable form max(z, 0) - z t + log(1 + exp(-|z|)) (multi-label,
// NaN targets skipped). Loss sums use double and a fixed block order (thread-count independent).
// Backward kernels write every row: the listed rows get the gradient, all others 0.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu/kernels_cpu.h"
#include "core/cpu/parallel.h"

TESSERA_CPU_TARGET_BEGIN
namespace tessera::cpu::TESSERA_CPU_NS {
namespace {

void zero(float* out, std::int64_t n) {
  if (n > 0) std::memset(out, 0, static_cast<std::size_t>(n) * sizeof(float));
}

// Listed rows handled per parallel chunk (one row costs a few hundred flops at most).
std::int64_t listed_work(std::span<const NodeId> rows, std::int64_t width) {
  return static_cast<std::int64_t>(rows.size()) * width * 8;
}

inline float stable_sigmoid(float z) {
  if (z >= 0.0f) return 1.0f / (1.0f + std::exp(-z));
  const float e = std::exp(z);
  return e / (1.0f + e);
}

}  // namespace

void log_softmax_forward(float* logp, const float* logits, std::int64_t r, std::int64_t c) {
  if (c == 0) return;
#pragma omp parallel for schedule(static) if (r * c * 8 >= detail::kParallelMinWork)
  for (std::int64_t row = 0; row < r; ++row) {
    const float* z = logits + row * c;
    float* out = logp + row * c;
    float max_z = z[0];
    for (std::int64_t k = 1; k < c; ++k) max_z = std::max(max_z, z[k]);
    float sum = 0.0f;
    for (std::int64_t k = 0; k < c; ++k) sum += std::exp(z[k] - max_z);
    const float log_sum = std::log(sum);
    for (std::int64_t k = 0; k < c; ++k) out[k] = (z[k] - max_z) - log_sum;
  }
}

double nll_loss_sum(const float* logp, const std::int64_t* labels, std::span<const NodeId> rows,
                    std::int64_t c) {
  double sum = 0.0;
  detail::reduce_rows(&sum, 1, static_cast<std::int64_t>(rows.size()),
                      [&](double* acc, std::int64_t i) {
                        const std::int64_t r = rows[static_cast<std::size_t>(i)];
                        acc[0] -= logp[r * c + labels[r]];
                      });
  return sum;
}

void log_softmax_nll_backward(float* d_logits, const float* logp, const std::int64_t* labels,
                              std::span<const NodeId> rows, float scale, std::int64_t r,
                              std::int64_t c) {
  zero(d_logits, r * c);
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(static) if (listed_work(rows, c) >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = rows[static_cast<std::size_t>(i)];
    const float* lp = logp + row * c;
    float* d = d_logits + row * c;
    for (std::int64_t k = 0; k < c; ++k) d[k] = scale * std::exp(lp[k]);
    const std::int64_t label = labels[row];
    d[label] = scale * (std::exp(lp[label]) - 1.0f);
  }
}

double sigmoid_bce_loss_sum(std::int64_t* count, const float* logits, const float* targets,
                            std::span<const NodeId> rows, std::int64_t t) {
  double sums[2];  // loss, number of terms
  detail::reduce_rows(sums, 2, static_cast<std::int64_t>(rows.size()),
                      [&](double* acc, std::int64_t i) {
                        const std::int64_t r = rows[static_cast<std::size_t>(i)];
                        for (std::int64_t k = 0; k < t; ++k) {
                          const double y = targets[r * t + k];
                          if (std::isnan(y)) continue;
                          const double z = logits[r * t + k];
                          acc[0] += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
                          acc[1] += 1.0;
                        }
                      });
  *count = static_cast<std::int64_t>(sums[1]);
  return sums[0];
}

void sigmoid_bce_backward(float* d_logits, const float* logits, const float* targets,
                          std::span<const NodeId> rows, float scale, std::int64_t r,
                          std::int64_t t) {
  zero(d_logits, r * t);
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(static) if (listed_work(rows, t) >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = rows[static_cast<std::size_t>(i)];
    for (std::int64_t k = 0; k < t; ++k) {
      const float y = targets[row * t + k];
      d_logits[row * t + k] =
          std::isnan(y) ? 0.0f : scale * (stable_sigmoid(logits[row * t + k]) - y);
    }
  }
}

}  // namespace tessera::cpu::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
