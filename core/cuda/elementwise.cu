// SPDX-License-Identifier: Apache-2.0
// CUDA fused elementwise kernels: bias + activation (ReLU, ELU) forward/backward, inverted dropout with the
// CPU's counter RNG (philox.h: the same mask bit for bit), and deterministic column sums (fixed
// row chunks summed in double, then the chunks in order). Outputs may alias inputs: each
// element is read before it is written by the same thread.
#include "core/cuda/common.cuh"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/philox.h"

namespace tessera::cuda {
namespace {

using detail::blocks_for;
using detail::kThreads;

__global__ void bias_act_forward_kernel(float* y, const float* x, const float* bias,
                                        Activation act, std::int64_t r, std::int64_t f) {
  const std::int64_t total = r * f;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    float v = x[i];
    if (bias) v += bias[i % f];
    if (act == Activation::Relu) v = v < 0.0f ? 0.0f : v;  // NaN stays NaN, as on the CPU
    if (act == Activation::Elu) v = v > 0.0f ? v : expm1f(v);
    y[i] = v;
  }
}

__global__ void act_backward_kernel(float* d_x, const float* d_y, const float* y, Activation act,
                                    std::int64_t total) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    if (act == Activation::Relu) {
      d_x[i] = y[i] > 0.0f ? d_y[i] : 0.0f;
    } else if (act == Activation::Elu) {  // y' = 1 for y > 0, else exp(x) = y + 1
      d_x[i] = y[i] > 0.0f ? d_y[i] : d_y[i] * (y[i] + 1.0f);
    } else {
      d_x[i] = d_y[i];
    }
  }
}

// One thread per block of 4 features of one row: one Philox call gives its 4 draws, exactly
// as the CPU's loop (feature k uses word k % 4 of block k / 4).
__global__ void dropout_kernel(float* out, const float* in, float p, float scale,
                               std::uint64_t key, const GlobalId* global_ids, std::int64_t r,
                               std::int64_t f) {
  const std::int64_t blocks_per_row = (f + 3) / 4;
  const std::int64_t total = r * blocks_per_row;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < total;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t row = t / blocks_per_row;
    const std::int64_t block = t % blocks_per_row;
    const PhiloxWords words = philox_words(key, static_cast<std::uint64_t>(global_ids[row]),
                                           static_cast<std::uint32_t>(block));
    const std::int64_t f0 = block * 4;
    for (int k = 0; k < 4 && f0 + k < f; ++k) {
      const std::int64_t i = row * f + f0 + k;
      out[i] = dropout_value(in[i], words.w[k], p, scale);
    }
  }
}

constexpr std::int64_t kChunkRows = 2048;  // rows per partial sum (fixed: order depends on R only)
constexpr int kTileCols = 32;
constexpr int kLanes = kThreads / kTileCols;

// partial (chunks, F): column sums of each chunk of kChunkRows rows. Block = 32 columns x 8
// lanes; lane j sums rows j, j + 8, ... of the chunk, then lanes are added in lane order.
__global__ void column_partials_kernel(double* partial, const float* x, std::int64_t r,
                                       std::int64_t f) {
  __shared__ double sums[kLanes][kTileCols];
  const std::int64_t col = std::int64_t{blockIdx.x} * kTileCols + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row0 = chunk * kChunkRows;
  const std::int64_t row1 = row0 + kChunkRows < r ? row0 + kChunkRows : r;
  double acc = 0.0;
  if (col < f) {
    for (std::int64_t row = row0 + threadIdx.y; row < row1; row += kLanes) acc += x[row * f + col];
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < f) {
    double total = 0.0;
    for (int lane = 0; lane < kLanes; ++lane) total += sums[lane][threadIdx.x];
    partial[chunk * f + col] = total;
  }
}

__global__ void column_finish_kernel(float* out, const double* partial, std::int64_t chunks,
                                     bool accumulate, std::int64_t f) {
  const std::int64_t col = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (col >= f) return;
  double total = 0.0;
  for (std::int64_t c = 0; c < chunks; ++c) total += partial[c * f + col];
  out[col] = accumulate ? out[col] + static_cast<float>(total) : static_cast<float>(total);
}

void apply_dropout(float* out, const float* in, float p, const CounterRng& rng,
                   const GlobalId* global_ids, std::int64_t r, std::int64_t f) {
  if (r == 0 || f == 0) return;
  const float scale = 1.0f / (1.0f - p);  // the same float the CPU computes
  dropout_kernel<<<blocks_for(r * ((f + 3) / 4)), kThreads, 0, compute_stream()>>>(
      out, in, p, scale, rng.key(), global_ids, r, f);
  TESSERA_CUDA_CHECK_LAUNCH();
}

__global__ void add_doubles_kernel(float* out, const double* values, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] += static_cast<float>(values[i]);
}

// Each operation rounded on its own (_rn: no fused multiply-add), as the CPU loop is written.
__global__ void adam_kernel(float* params, float* m, float* v, const float* grads,
                            const float* decay, AdamStep step, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float g = __fadd_rn(grads[i], __fmul_rn(decay[i], params[i]));
    const float mi = __fadd_rn(__fmul_rn(step.beta1, m[i]), __fmul_rn(1.0f - step.beta1, g));
    const float vi = __fadd_rn(__fmul_rn(step.beta2, v[i]),
                               __fmul_rn(__fmul_rn(1.0f - step.beta2, g), g));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), step.inv_sqrt_bias2), step.eps);
    params[i] = __fsub_rn(params[i], __fdiv_rn(__fmul_rn(step.step_size, mi), denom));
  }
}

}  // namespace

void add_doubles(float* out, const double* values, std::int64_t n) {
  if (n == 0) return;
  add_doubles_kernel<<<blocks_for(n), kThreads, 0, compute_stream()>>>(out, values, n);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void adam_update(float* params, float* m, float* v, const float* grads, const float* decay,
                 const AdamStep& step, std::int64_t n) {
  if (n == 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, compute_stream()>>>(params, m, v, grads, decay, step,
                                                                n);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void bias_act_forward(float* y, const float* x, const float* bias, Activation act, std::int64_t r,
                      std::int64_t f) {
  if (r * f == 0) return;
  bias_act_forward_kernel<<<blocks_for(r * f), kThreads, 0, compute_stream()>>>(
      y, x, bias, act, r, f);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void bias_act_backward(float* d_x, float* d_bias, const float* d_y, const float* y, Activation act,
                       std::int64_t r, std::int64_t f) {
  if (r * f > 0) {
    act_backward_kernel<<<blocks_for(r * f), kThreads, 0, compute_stream()>>>(
        d_x, d_y, y, act, r * f);
    TESSERA_CUDA_CHECK_LAUNCH();
  }
  if (d_bias) column_sums(d_bias, d_x, /*accumulate=*/true, r, f);
}

void dropout_forward(float* y, const float* x, float p, const CounterRng& rng,
                     const GlobalId* global_ids, std::int64_t r, std::int64_t f) {
  apply_dropout(y, x, p, rng, global_ids, r, f);
}

void dropout_backward(float* d_x, const float* d_y, float p, const CounterRng& rng,
                      const GlobalId* global_ids, std::int64_t r, std::int64_t f) {
  apply_dropout(d_x, d_y, p, rng, global_ids, r, f);
}

void column_sums(float* out, const float* x, bool accumulate, std::int64_t r, std::int64_t f) {
  if (f == 0) return;
  const std::int64_t chunks = r == 0 ? 0 : (r + kChunkRows - 1) / kChunkRows;
  TESSERA_CHECK(chunks <= 65535, InvalidArgument, "column_sums: ", r, " rows exceed ",
                65535 * kChunkRows, " (the grid's y limit)");
  DeviceBuffer partial(static_cast<std::size_t>(chunks * f) * sizeof(double));
  if (chunks > 0) {
    const dim3 grid(static_cast<unsigned>((f + kTileCols - 1) / kTileCols),
                    static_cast<unsigned>(chunks));
    column_partials_kernel<<<grid, dim3(kTileCols, kLanes), 0, compute_stream()>>>(
        partial.as<double>(), x, r, f);
    TESSERA_CUDA_CHECK_LAUNCH();
  }
  column_finish_kernel<<<blocks_for(f), kThreads, 0, compute_stream()>>>(
      out, partial.as<double>(), chunks, accumulate, f);
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace tessera::cuda
