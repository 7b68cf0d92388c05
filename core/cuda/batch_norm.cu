// SPDX-License-Identifier: Apache-2.0
// CUDA batch normalisation over rows (nodes), the twin of cpu/batch_norm.cc and split the same
// way (stats -> forward, backward_stats -> backward) so that a distributed caller can all-reduce
// the per-column sums between the steps. Sums are double over fixed row chunks, then the chunks
// in order (deterministic, as column_sums in elementwise.cu). y and x_hat may alias x, d_x may
// alias d_y: each element is read before it is written by the same thread.
#include "core/cuda/common.cuh"
#include "core/cuda/kernels_cuda.h"

namespace tessera::cuda {
namespace {

using detail::blocks_for;
using detail::kThreads;

constexpr std::int64_t kChunkRows = 2048;  // rows per partial sum (fixed: order depends on R only)
constexpr int kTileCols = 32;
constexpr int kLanes = kThreads / kTileCols;

// Per column, the sums of a and of a * b (a * a when b is null); float products are exact in
// double, so only the order of the additions differs from the CPU.
// partial (chunks, 2F): row c holds chunk c's first sums in [0, F), second sums in [F, 2F).
// Block = 32 columns x 8 lanes; lane j sums rows j, j + 8, ... of the chunk, then the lanes are
// added in lane order. Grid = (chunks, column tiles).
__global__ void moment_partials_kernel(double* partial, const float* a, const float* b,
                                       std::int64_t r, std::int64_t f) {
  __shared__ double firsts[kLanes][kTileCols];
  __shared__ double seconds[kLanes][kTileCols];
  const std::int64_t col = std::int64_t{blockIdx.y} * kTileCols + threadIdx.x;
  const std::int64_t chunk = blockIdx.x;
  const std::int64_t row0 = chunk * kChunkRows;
  const std::int64_t row1 = row0 + kChunkRows < r ? row0 + kChunkRows : r;
  double first = 0.0, second = 0.0;
  if (col < f) {
    for (std::int64_t row = row0 + threadIdx.y; row < row1; row += kLanes) {
      const double v = a[row * f + col];
      first += v;
      second += v * (b ? b[row * f + col] : v);
    }
  }
  firsts[threadIdx.y][threadIdx.x] = first;
  seconds[threadIdx.y][threadIdx.x] = second;
  __syncthreads();
  if (threadIdx.y == 0 && col < f) {
    double total_first = 0.0, total_second = 0.0;
    for (int lane = 0; lane < kLanes; ++lane) {
      total_first += firsts[lane][threadIdx.x];
      total_second += seconds[lane][threadIdx.x];
    }
    partial[chunk * 2 * f + col] = total_first;
    partial[chunk * 2 * f + f + col] = total_second;
  }
}

// first (F), second (F) = the chunks' partials added in chunk order (0 when there are none).
__global__ void moment_finish_kernel(double* first, double* second, const double* partial,
                                     std::int64_t chunks, std::int64_t f) {
  const std::int64_t col = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (col >= f) return;
  double total_first = 0.0, total_second = 0.0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    total_first += partial[c * 2 * f + col];
    total_second += partial[c * 2 * f + f + col];
  }
  first[col] = total_first;
  second[col] = total_second;
}

// first, second (F, device) = per-column sums of a and of a * b (a * a when b is null).
void column_moments(double* first, double* second, const float* a, const float* b,
                    std::int64_t r, std::int64_t f, const char* kernel) {
  if (f == 0) return;
  const std::int64_t chunks = (r + kChunkRows - 1) / kChunkRows;
  const std::int64_t tiles = (f + kTileCols - 1) / kTileCols;
  TESSERA_CHECK(tiles <= 65535, InvalidArgument, kernel, ": ", f, " columns exceed ",
                65535 * kTileCols, " (the grid's y limit)");
  TESSERA_CHECK(chunks < std::int64_t{1} << 31, InvalidArgument, kernel, ": ", r,
                " rows exceed the grid");
  DeviceBuffer partial(static_cast<std::size_t>(chunks * 2 * f) * sizeof(double));
  cudaStream_t stream = compute_stream();
  if (chunks > 0) {
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(tiles));
    moment_partials_kernel<<<grid, dim3(kTileCols, kLanes), 0, stream>>>(partial.as<double>(), a,
                                                                         b, r, f);
    TESSERA_CUDA_CHECK_LAUNCH();
  }
  moment_finish_kernel<<<blocks_for(f), kThreads, 0, stream>>>(first, second,
                                                               partial.as<double>(), chunks, f);
  TESSERA_CUDA_CHECK_LAUNCH();
}

__global__ void forward_kernel(float* y, float* x_hat, const float* x, const float* mean,
                               const float* inv_std, const float* gamma, const float* beta,
                               std::int64_t r, std::int64_t f) {
  const std::int64_t total = r * f;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t k = i % f;
    const float xh = (x[i] - mean[k]) * inv_std[k];
    x_hat[i] = xh;
    y[i] = gamma[k] * xh + beta[k];
  }
}

// coefficients (3, F): gamma * inv_std, mean_dy, mean_dy_xhat, in float as the CPU rounds them.
__global__ void backward_coefficients_kernel(float* coefficients, const float* gamma,
                                             const float* inv_std, const double* sum_dy,
                                             const double* sum_dy_xhat, double count,
                                             std::int64_t f) {
  const std::int64_t k = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (k >= f) return;
  coefficients[k] = gamma[k] * inv_std[k];
  coefficients[f + k] = static_cast<float>(sum_dy[k] / count);
  coefficients[2 * f + k] = static_cast<float>(sum_dy_xhat[k] / count);
}

__global__ void backward_kernel(float* d_x, const float* d_y, const float* x_hat,
                                const float* coefficients, std::int64_t r, std::int64_t f) {
  const std::int64_t total = r * f;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t k = i % f;
    d_x[i] = coefficients[k] * (d_y[i] - coefficients[f + k] - x_hat[i] * coefficients[2 * f + k]);
  }
}

}  // namespace

void batch_norm_stats(double* sum, double* sum_sq, const float* x, std::int64_t r, std::int64_t f) {
  column_moments(sum, sum_sq, x, nullptr, r, f, "batch_norm_stats");
}

void batch_norm_forward(float* y, float* x_hat, const float* x, const float* mean,
                        const float* inv_std, const float* gamma, const float* beta, std::int64_t r,
                        std::int64_t f) {
  if (r * f == 0) return;
  forward_kernel<<<blocks_for(r * f), kThreads, 0, compute_stream()>>>(y, x_hat, x, mean, inv_std,
                                                                       gamma, beta, r, f);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward_stats(double* sum_dy, double* sum_dy_xhat, const float* d_y,
                               const float* x_hat, std::int64_t r, std::int64_t f) {
  column_moments(sum_dy, sum_dy_xhat, d_y, x_hat, r, f, "batch_norm_backward_stats");
}

void batch_norm_backward(float* d_x, const float* d_y, const float* x_hat, const float* gamma,
                         const float* inv_std, const double* sum_dy, const double* sum_dy_xhat,
                         double count, std::int64_t r, std::int64_t f) {
  if (r * f == 0) return;
  DeviceBuffer coefficients(static_cast<std::size_t>(3 * f) * sizeof(float));
  cudaStream_t stream = compute_stream();
  backward_coefficients_kernel<<<blocks_for(f), kThreads, 0, stream>>>(
      coefficients.as<float>(), gamma, inv_std, sum_dy, sum_dy_xhat, count, f);
  TESSERA_CUDA_CHECK_LAUNCH();
  backward_kernel<<<blocks_for(r * f), kThreads, 0, stream>>>(d_x, d_y, x_hat,
                                                              coefficients.as<float>(), r, f);
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace tessera::cuda
