// CPU dense kernels: GEMM through OpenBLAS cblas_sgemm (row-major; a tuned BLAS beats anything
// hand-written here), axpy and column sums with OpenMP, and the thread settings shared by
// OpenMP and OpenBLAS. This is the only file that includes <cblas.h>.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "engine/core/cpu/kernels_cpu.h"
#include "engine/core/cpu/parallel.h"
#include "engine/core/error.h"

namespace tessera::cpu {

void gemm(float* c, const float* a, bool trans_a, const float* b, bool trans_b, float alpha,
          float beta, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS rejects a zero leading dimension; c = beta * c (beta 0 overwrites NaN)
    const std::int64_t total = m * n;
    for (std::int64_t i = 0; i < total; ++i) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return;
  }
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  TESSERA_CHECK(m <= kMax && n <= kMax && k <= kMax, InvalidArgument, "gemm: dimensions (", m, ", ",
                n, ", ", k, ") exceed the BLAS int range");
  // Row-major: a stored (M, K) or, transposed, (K, M); its leading dimension is its column count.
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, lda, b, ldb, beta, c, static_cast<int>(n));
}

void axpy(float* y, float alpha, const float* x, std::int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kParallelMinWork * 8)
  for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void column_sums(float* out, const float* x, bool accumulate, std::int64_t r, std::int64_t f) {
  std::vector<double> sums(static_cast<std::size_t>(f));
  detail::reduce_rows(sums.data(), f, r, [&](double* acc, std::int64_t row) {
    const float* xr = x + row * f;
    for (std::int64_t k = 0; k < f; ++k) acc[k] += xr[k];
  });
  for (std::int64_t k = 0; k < f; ++k) {
    out[k] = accumulate ? out[k] + static_cast<float>(sums[k]) : static_cast<float>(sums[k]);
  }
}

void set_num_threads(int threads) {
  if (threads <= 0) return;
  omp_set_num_threads(threads);
  // OpenBLAS keeps its own pool; capping it at the same count keeps kernels from
  // oversubscribing the cores when both run.
  openblas_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace tessera::cpu
