// SPDX-License-Identifier: Apache-2.0
// CUDA losses: row-wise log-softmax (one warp per row: max, sum of exp, log, in float as on the
// CPU), the NLL sum over listed rows (double, one block-level reduction, then the blocks in
// order: deterministic), and the fused log-softmax + NLL backward; for multi-label tasks the
// sigmoid BCE sum from logits (the CPU's stable formula in double, NaN targets skipped, a fixed
// grid and fixed-order reductions: deterministic) and its backward.
#include "core/cuda/common.cuh"
#include "core/cuda/kernels_cuda.h"

namespace tessera::cuda {
namespace {

using detail::blocks_for;
using detail::kThreads;

constexpr int kWarp = 32;

__global__ void log_softmax_kernel(float* logp, const float* logits, std::int64_t r,
                                   std::int64_t c) {
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / kWarp);
  const int lane = threadIdx.x % kWarp;
  for (std::int64_t row = (blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x) / kWarp; row < r;
       row += warps) {
    const float* z = logits + row * c;
    float* out = logp + row * c;
    float max_z = z[0];
    for (std::int64_t k = lane; k < c; k += kWarp) max_z = fmaxf(max_z, z[k]);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      max_z = fmaxf(max_z, __shfl_xor_sync(0xffffffffu, max_z, offset));
    }
    float sum = 0.0f;
    for (std::int64_t k = lane; k < c; k += kWarp) sum += expf(z[k] - max_z);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    const float log_sum = logf(sum);
    __syncwarp();  // every lane has read its z before any lane writes (logp may alias logits)
    for (std::int64_t k = lane; k < c; k += kWarp) out[k] = (z[k] - max_z) - log_sum;
  }
}

// partial[block] = sum over this block's listed rows of -logp[row, label].
__global__ void nll_partial_kernel(double* partial, const float* logp, const std::int64_t* labels,
                                   const NodeId* rows, std::int64_t n, std::int64_t c) {
  __shared__ double sums[kThreads];
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  double value = 0.0;
  if (i < n) {
    const std::int64_t row = rows[i];
    value = -static_cast<double>(logp[row * c + labels[row]]);
  }
  sums[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) sums[threadIdx.x] += sums[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
}

__global__ void sum_in_order_kernel(double* total, const double* partial, std::int64_t count) {
  double sum = 0.0;
  for (std::int64_t b = 0; b < count; ++b) sum += partial[b];
  *total = sum;
}

__global__ void nll_backward_kernel(float* d_logits, const float* logp, const std::int64_t* labels,
                                    const NodeId* rows, std::int64_t n, float scale,
                                    std::int64_t c) {
  const std::int64_t total = n * c;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t row = rows[i / c];
    const std::int64_t k = i % c;
    const float e = expf(logp[row * c + k]);
    d_logits[row * c + k] = labels[row] == k ? scale * (e - 1.0f) : scale * e;
  }
}

}  // namespace

void log_softmax_forward(float* logp, const float* logits, std::int64_t r, std::int64_t c) {
  if (r == 0 || c == 0) return;
  log_softmax_kernel<<<blocks_for(r * kWarp), kThreads, 0, compute_stream()>>>(logp, logits, r, c);
  TESSERA_CUDA_CHECK_LAUNCH();
}

double nll_loss_sum(const float* logp, const std::int64_t* labels, const NodeId* rows,
                    std::int64_t n, std::int64_t c) {
  if (n == 0) return 0.0;
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  TESSERA_CHECK(blocks <= std::int64_t{1} << 31, InvalidArgument, "nll_loss_sum: ", n,
                " rows exceed the grid");
  DeviceBuffer partial(static_cast<std::size_t>(blocks + 1) * sizeof(double));
  double* partials = partial.as<double>();
  cudaStream_t stream = compute_stream();
  nll_partial_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(partials + 1, logp,
                                                                             labels, rows, n, c);
  TESSERA_CUDA_CHECK_LAUNCH();
  sum_in_order_kernel<<<1, 1, 0, stream>>>(partials, partials + 1, blocks);
  TESSERA_CUDA_CHECK_LAUNCH();
  double total = 0.0;
  TESSERA_CUDA_CHECK(
      cudaMemcpyAsync(&total, partials, sizeof(double), cudaMemcpyDeviceToHost, stream));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return total;
}

void log_softmax_nll_backward(float* d_logits, const float* logp, const std::int64_t* labels,
                              const NodeId* rows, std::int64_t n, float scale, std::int64_t r,
                              std::int64_t c) {
  if (r * c == 0) return;
  cudaStream_t stream = compute_stream();
  TESSERA_CUDA_CHECK(
      cudaMemsetAsync(d_logits, 0, static_cast<std::size_t>(r * c) * sizeof(float), stream));
  if (n == 0) return;
  nll_backward_kernel<<<blocks_for(n * c), kThreads, 0, stream>>>(d_logits, logp, labels, rows, n,
                                                                  scale, c);
  TESSERA_CUDA_CHECK_LAUNCH();
}

// ---- sigmoid binary cross-entropy (multi-label) ----
namespace {

// Blocks of the BCE sum: a function of n * T only (never of the device), so the order of the
// double additions, and with it the result, is fixed for given inputs.
constexpr std::int64_t kMaxLossBlocks = 1024;

struct LossTotal {
  double loss;
  std::int64_t count;
};

// The CPU's term in double: max(z, 0) - z y + log1p(exp(-|z|)), max as std::max (NaN z stays).
__device__ double bce_term(double z, double y) {
  return (z < 0.0 ? 0.0 : z) - z * y + log1p(exp(-fabs(z)));
}

// The CPU's stable_sigmoid, in float.
__device__ float stable_sigmoid(float z) {
  if (z >= 0.0f) return 1.0f / (1.0f + expf(-z));
  const float e = expf(z);
  return e / (1.0f + e);
}

// Tree sum of each thread's (loss, count) in shared memory; thread 0 returns the block's total.
__device__ LossTotal block_sum(double loss, std::int64_t count) {
  __shared__ double losses[kThreads];
  __shared__ std::int64_t counts[kThreads];
  losses[threadIdx.x] = loss;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) {
      losses[threadIdx.x] += losses[threadIdx.x + stride];
      counts[threadIdx.x] += counts[threadIdx.x + stride];
    }
    __syncthreads();
  }
  return {losses[0], counts[0]};
}

// partial_*[block] = this block's (loss, count) over its grid-stride share of the n * T terms.
__global__ void bce_partial_kernel(double* partial_loss, std::int64_t* partial_count,
                                   const float* logits, const float* targets, const NodeId* rows,
                                   std::int64_t n, std::int64_t t) {
  const std::int64_t total = n * t;
  double loss = 0.0;
  std::int64_t count = 0;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t at = std::int64_t{rows[i / t]} * t + i % t;
    const double y = targets[at];
    if (isnan(y)) continue;
    loss += bce_term(logits[at], y);
    ++count;
  }
  const LossTotal sum = block_sum(loss, count);
  if (threadIdx.x == 0) {
    partial_loss[blockIdx.x] = sum.loss;
    partial_count[blockIdx.x] = sum.count;
  }
}

// One block: thread j adds partials j, j + kThreads, ... in order, then the fixed tree.
__global__ void bce_finish_kernel(LossTotal* total, const double* partial_loss,
                                  const std::int64_t* partial_count, std::int64_t blocks) {
  double loss = 0.0;
  std::int64_t count = 0;
  for (std::int64_t b = threadIdx.x; b < blocks; b += blockDim.x) {
    loss += partial_loss[b];
    count += partial_count[b];
  }
  const LossTotal sum = block_sum(loss, count);
  if (threadIdx.x == 0) *total = sum;
}

__global__ void bce_backward_kernel(float* d_logits, const float* logits, const float* targets,
                                    const NodeId* rows, std::int64_t n, float scale,
                                    std::int64_t t) {
  const std::int64_t total = n * t;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t at = std::int64_t{rows[i / t]} * t + i % t;
    const float y = targets[at];
    d_logits[at] = isnan(y) ? 0.0f : scale * (stable_sigmoid(logits[at]) - y);
  }
}

}  // namespace

double sigmoid_bce_loss_sum(std::int64_t* count, const float* logits, const float* targets,
                            const NodeId* rows, std::int64_t n, std::int64_t t) {
  *count = 0;
  if (n * t == 0) return 0.0;
  const std::int64_t blocks = std::min(kMaxLossBlocks, (n * t + kThreads - 1) / kThreads);
  // Layout: the total, then the blocks' losses, then their counts (all 8-byte aligned).
  DeviceBuffer buffer(sizeof(LossTotal) +
                      static_cast<std::size_t>(blocks) * (sizeof(double) + sizeof(std::int64_t)));
  auto* result = buffer.as<LossTotal>();
  auto* partial_loss = reinterpret_cast<double*>(result + 1);
  auto* partial_count = reinterpret_cast<std::int64_t*>(partial_loss + blocks);
  cudaStream_t stream = compute_stream();
  bce_partial_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      partial_loss, partial_count, logits, targets, rows, n, t);
  TESSERA_CUDA_CHECK_LAUNCH();
  bce_finish_kernel<<<1, kThreads, 0, stream>>>(result, partial_loss, partial_count, blocks);
  TESSERA_CUDA_CHECK_LAUNCH();
  LossTotal total{};
  TESSERA_CUDA_CHECK(
      cudaMemcpyAsync(&total, result, sizeof(LossTotal), cudaMemcpyDeviceToHost, stream));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  *count = total.count;
  return total.loss;
}

void sigmoid_bce_backward(float* d_logits, const float* logits, const float* targets,
                          const NodeId* rows, std::int64_t n, float scale, std::int64_t r,
                          std::int64_t t) {
  if (r * t == 0) return;
  cudaStream_t stream = compute_stream();
  TESSERA_CUDA_CHECK(
      cudaMemsetAsync(d_logits, 0, static_cast<std::size_t>(r * t) * sizeof(float), stream));
  if (n == 0) return;
  bce_backward_kernel<<<blocks_for(n * t), kThreads, 0, stream>>>(d_logits, logits, targets, rows,
                                                                  n, scale, t);
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace tessera::cuda
