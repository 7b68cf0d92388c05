// SPDX-License-Identifier: Apache-2.0
// BatchNorm1d forward/backward over the batch_norm_* kernels. Per-column sums are computed
// locally, all-reduced in one call (2F doubles) and divided by the global row count, so the
// result does not depend on how rows are partitioned. Backward OVERWRITES d_x and ACCUMULATES
// d_gamma and d_beta (local contributions; the trainer all-reduces parameter gradients).
#include "layers/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/kernels.h"

namespace tessera {

namespace {

void check_columns(std::span<const float> v, std::int64_t f, const char* what) {
  TESSERA_CHECK(static_cast<std::int64_t>(v.size()) == f, InvalidArgument, "batch norm ", what,
                ": expected ", f, " entries, got ", v.size());
}

}  // namespace

void batch_norm1d_forward(Tensor& y, BatchNormCache& cache, std::span<float> running_mean,
                          std::span<float> running_var, const Tensor& x,
                          std::span<const float> gamma, std::span<const float> beta,
                          bool training, std::int64_t global_rows,
                          const BatchNormAllReduce& all_reduce) {
  const std::int64_t n = x.rows(), f = x.cols();
  check_columns(gamma, f, "gamma");
  check_columns(beta, f, "beta");
  check_columns(running_mean, f, "running_mean");
  check_columns(running_var, f, "running_var");
  const auto fs = static_cast<std::size_t>(f);
  cache.training = training;
  cache.mean.resize(fs);
  cache.inv_std.resize(fs);
  if (training) {
    TESSERA_CHECK(global_rows >= 2, InvalidArgument,
                  "batch norm in training needs at least 2 rows over all ranks, got ", global_rows);
    cache.sums.resize(2 * fs);
    std::span<double> sums(cache.sums);
    batch_norm_stats(sums.first(fs), sums.last(fs), x);  // local [sum | sum_sq]
    if (all_reduce) all_reduce(sums);
    const double count = static_cast<double>(global_rows);
    for (std::size_t j = 0; j < fs; ++j) {
      const double mean = sums[j] / count;
      const double var = std::max(sums[fs + j] / count - mean * mean, 0.0);  // biased
      cache.mean[j] = static_cast<float>(mean);
      cache.inv_std[j] = static_cast<float>(1.0 / std::sqrt(var + kBatchNormEps));
      const double unbiased = var * count / (count - 1.0);
      running_mean[j] = static_cast<float>((1.0 - kBatchNormMomentum) * running_mean[j] +
                                           kBatchNormMomentum * mean);
      running_var[j] = static_cast<float>((1.0 - kBatchNormMomentum) * running_var[j] +
                                          kBatchNormMomentum * unbiased);
    }
  } else {
    for (std::size_t j = 0; j < fs; ++j) {
      cache.mean[j] = running_mean[j];
      cache.inv_std[j] =
          static_cast<float>(1.0 / std::sqrt(static_cast<double>(running_var[j]) + kBatchNormEps));
    }
  }
  y.resize(n, f, x.device());            // (N, F)
  cache.x_hat.resize(n, f, x.device());  // (N, F)
  batch_norm_forward(y, cache.x_hat, x, cache.mean, cache.inv_std, gamma, beta);
}

void batch_norm1d_backward(Tensor& d_x, std::span<float> d_gamma, std::span<float> d_beta,
                           BatchNormCache& cache, const Tensor& d_y, std::span<const float> gamma,
                           std::int64_t global_rows, const BatchNormAllReduce& all_reduce) {
  TESSERA_CHECK(cache.training, InvalidArgument,
                "batch norm backward needs a training forward (batch statistics) before it");
  const std::int64_t n = cache.x_hat.rows(), f = cache.x_hat.cols();
  check_shape(d_y, n, f, "batch norm d_y");
  check_columns(gamma, f, "gamma");
  check_columns(d_gamma, f, "d_gamma");
  check_columns(d_beta, f, "d_beta");
  const auto fs = static_cast<std::size_t>(f);
  cache.sums.resize(2 * fs);
  std::span<double> sums(cache.sums);
  std::span<double> sum_dy = sums.first(fs), sum_dy_xhat = sums.last(fs);
  batch_norm_backward_stats(sum_dy, sum_dy_xhat, d_y, cache.x_hat);  // local sums
  add_doubles(d_gamma, sum_dy_xhat, d_y.device());  // d_gamma, d_beta live with the parameters
  add_doubles(d_beta, sum_dy, d_y.device());
  if (all_reduce) all_reduce(sums);
  d_x.resize(n, f, d_y.device());  // (N, F)
  batch_norm_backward(d_x, d_y, cache.x_hat, gamma, cache.inv_std, sum_dy, sum_dy_xhat,
                      static_cast<double>(global_rows));
}

}  // namespace tessera
