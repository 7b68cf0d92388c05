// SPDX-License-Identifier: Apache-2.0
// CUDA dense kernels: row-major SGEMM through cuBLAS (column-major) by computing
// C^T = op(B)^T op(A)^T, i.e. swapping the operands and their leading dimensions; axpy through
// cuBLAS. Column sums are a custom kernel (elementwise.cu) for a fixed summation order.
#include <limits>

#include "core/cuda/check.h"
#include "core/cuda/handles.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/libraries.h"
#include "core/cuda/runtime.h"

namespace tessera::cuda {

void gemm(float* c, const float* a, bool trans_a, const float* b, bool trans_b, float alpha,
          float beta, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m == 0 || n == 0) return;
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  TESSERA_CHECK(m <= kMax && n <= kMax && k <= kMax, InvalidArgument, "gemm: dimensions (", m,
                ", ", n, ", ", k, ") exceed the cuBLAS int range");
  cublasHandle_t handle = cublas_handle();
  if (k == 0) {  // c = beta * c; beta 0 overwrites NaN, as on the CPU
    if (beta == 0.0f) {
      TESSERA_CUDA_CHECK(cudaMemsetAsync(c, 0, static_cast<std::size_t>(m * n) * sizeof(float),
                                         compute_stream()));
    } else {
      TESSERA_CUBLAS_CHECK(cublas().sscal(handle, static_cast<int>(m * n), &beta, c, 1));
    }
    return;
  }
  // Row-major X (r, c) is column-major X^T (c, r) with leading dimension c.
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  TESSERA_CUBLAS_CHECK(cublas().sgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                      static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb, a,
                                      lda, &beta, c, static_cast<int>(n)));
}

void axpy(float* y, float alpha, const float* x, std::int64_t n) {
  if (n == 0) return;
  TESSERA_CHECK(n <= std::numeric_limits<int>::max(), InvalidArgument, "axpy: ", n,
                " elements exceed the cuBLAS int range");
  TESSERA_CUBLAS_CHECK(cublas().saxpy(cublas_handle(), static_cast<int>(n), &alpha, x, 1, y, 1));
}

}  // namespace tessera::cuda
