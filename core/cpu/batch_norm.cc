// SPDX-License-Identifier: Apache-2.0
// CPU batch normalisation over rows (nodes), split so that a distributed caller can all-reduce
// the per-column sums between the steps: stats -> forward, backward_stats -> backward. Sums are
// double and use a fixed block order (thread-count independent). y and x_hat may alias x, d_x
// may alias d_y (each element is read before it is written).
#include <vector>

#include "core/cpu/kernels_cpu.h"
#include "core/cpu/parallel.h"

TESSERA_CPU_TARGET_BEGIN
namespace tessera::cpu::TESSERA_CPU_NS {

void batch_norm_stats(double* sum, double* sum_sq, const float* x, std::int64_t r, std::int64_t f) {
  std::vector<double> sums(static_cast<std::size_t>(2 * f));  // (sum, sum_sq) per column
  detail::reduce_rows(sums.data(), 2 * f, r, [&](double* acc, std::int64_t row) {
    const float* x_row = x + row * f;
    for (std::int64_t k = 0; k < f; ++k) {
      const double v = x_row[k];
      acc[k] += v;
      acc[f + k] += v * v;
    }
  });
  for (std::int64_t k = 0; k < f; ++k) {
    sum[k] = sums[static_cast<std::size_t>(k)];
    sum_sq[k] = sums[static_cast<std::size_t>(f + k)];
  }
}

void batch_norm_forward(float* y, float* x_hat, const float* x, const float* mean,
                        const float* inv_std, const float* gamma, const float* beta, std::int64_t r,
                        std::int64_t f) {
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork)
  for (std::int64_t row = 0; row < r; ++row) {
    const float* x_row = x + row * f;
    float* xh_row = x_hat + row * f;
    float* y_row = y + row * f;
    for (std::int64_t k = 0; k < f; ++k) {
      const float xh = (x_row[k] - mean[k]) * inv_std[k];
      xh_row[k] = xh;
      y_row[k] = gamma[k] * xh + beta[k];
    }
  }
}

void batch_norm_backward_stats(double* sum_dy, double* sum_dy_xhat, const float* d_y,
                               const float* x_hat, std::int64_t r, std::int64_t f) {
  std::vector<double> sums(static_cast<std::size_t>(2 * f));  // (sum_dy, sum_dy_xhat)
  detail::reduce_rows(sums.data(), 2 * f, r, [&](double* acc, std::int64_t row) {
    const float* dy_row = d_y + row * f;
    const float* xh_row = x_hat + row * f;
    for (std::int64_t k = 0; k < f; ++k) {
      const double dy = dy_row[k];
      acc[k] += dy;
      acc[f + k] += dy * xh_row[k];
    }
  });
  for (std::int64_t k = 0; k < f; ++k) {
    sum_dy[k] = sums[static_cast<std::size_t>(k)];
    sum_dy_xhat[k] = sums[static_cast<std::size_t>(f + k)];
  }
}

void batch_norm_backward(float* d_x, const float* d_y, const float* x_hat, const float* gamma,
                         const float* inv_std, const double* sum_dy, const double* sum_dy_xhat,
                         double count, std::int64_t r, std::int64_t f) {
  // Per column: d_x = a * (d_y - mean_dy - x_hat * mean_dy_xhat), a = gamma * inv_std.
  std::vector<float> scale(static_cast<std::size_t>(f)), mean_dy(scale.size()),
      mean_dy_xhat(scale.size());
  for (std::int64_t k = 0; k < f; ++k) {
    const std::size_t i = static_cast<std::size_t>(k);
    scale[i] = gamma[k] * inv_std[k];
    mean_dy[i] = static_cast<float>(sum_dy[k] / count);
    mean_dy_xhat[i] = static_cast<float>(sum_dy_xhat[k] / count);
  }
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork)
  for (std::int64_t row = 0; row < r; ++row) {
    const float* dy_row = d_y + row * f;
    const float* xh_row = x_hat + row * f;
    float* dx_row = d_x + row * f;
    for (std::int64_t k = 0; k < f; ++k) {
      dx_row[k] = scale[static_cast<std::size_t>(k)] *
                  (dy_row[k] - mean_dy[static_cast<std::size_t>(k)] -
                   xh_row[k] * mean_dy_xhat[static_cast<std::size_t>(k)]);
    }
  }
}

}  // namespace tessera::cpu::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
