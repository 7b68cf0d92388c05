// SPDX-License-Identifier: Apache-2.0
// CUDA row movement for halo exchange: gather listed rows into a packed block, scatter a packed
// block back (assignment for distinct rows, atomic addition where rows may repeat). One thread
// per element, consecutive threads on consecutive columns of a row (coalesced).
#include "core/cuda/common.cuh"
#include "core/cuda/kernels_cuda.h"

namespace tessera::cuda {
namespace {

using detail::blocks_for;
using detail::kThreads;

enum class Mode { Gather, Scatter, ScatterAdd };

template <Mode kMode>
__global__ void rows_kernel(float* out, const float* x, const NodeId* rows, std::int64_t n,
                            std::int64_t f) {
  const std::int64_t total = n * f;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t item = i / f;
    const std::int64_t col = i % f;
    const std::int64_t row = rows[item];
    if constexpr (kMode == Mode::Gather) {
      out[i] = x[row * f + col];
    } else if constexpr (kMode == Mode::Scatter) {
      out[row * f + col] = x[i];
    } else {
      atomicAdd(out + row * f + col, x[i]);
    }
  }
}

template <Mode kMode>
void launch(float* out, const float* x, const NodeId* rows, std::int64_t n, std::int64_t f) {
  if (n == 0 || f == 0) return;
  rows_kernel<kMode><<<blocks_for(n * f), kThreads, 0, compute_stream()>>>(out, x, rows, n, f);
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gather_rows(float* out, const float* x, const NodeId* rows, std::int64_t n, std::int64_t f) {
  launch<Mode::Gather>(out, x, rows, n, f);
}

void scatter_add_rows(float* out, const float* x, const NodeId* rows, std::int64_t n,
                      std::int64_t f) {
  launch<Mode::ScatterAdd>(out, x, rows, n, f);
}

void scatter_rows(float* out, const float* x, const NodeId* rows, std::int64_t n, std::int64_t f) {
  launch<Mode::Scatter>(out, x, rows, n, f);
}

}  // namespace tessera::cuda
