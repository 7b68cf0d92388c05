// SPDX-License-Identifier: Apache-2.0
// CPU dense kernels: GEMM through OpenBLAS cblas_sgemm (row-major; a tuned BLAS beats anything
// hand-written here) split over the OpenMP team, axpy and column sums with OpenMP, and the
// flat-buffer updates of the parameters (Adam, adding doubles). The only kernel source that
// includes <cblas.h> (dispatch.cc asks it which kernels OpenBLAS chose).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <utility>
#include <vector>

#include "core/cpu/kernels_cpu.h"
#include "core/cpu/parallel.h"
#include "core/error.h"

TESSERA_CPU_TARGET_BEGIN
namespace tessera::cpu::TESSERA_CPU_NS {

namespace {

// One single-threaded cblas_sgemm on row-major operands with explicit leading dimensions.
void sgemm(const float* a, int lda, bool trans_a, const float* b, int ldb, bool trans_b,
           float* c, int ldc, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           float beta) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, lda, b, ldb, beta, c, ldc);
}

// OpenBLAS runs single-threaded inside Tessera: the parallelism comes from the OpenMP team that
// every other kernel uses, so two thread pools never spin against each other on the same cores
// (measured: 2 OpenMP + 2 OpenBLAS threads on 2 cores ran a small model 3x slower than 1 thread).
void pin_blas_to_one_thread() {
  static const bool pinned = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)pinned;
}

constexpr std::int64_t kSerialFlops = std::int64_t{1} << 21;  // below this, one call
constexpr std::int64_t kMinChunkK = 1024;                     // K per partial product
constexpr std::int64_t kMaxChunks = 64;

void check_blas_dims(std::int64_t m, std::int64_t n, std::int64_t k) {
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  TESSERA_CHECK(m <= kMax && n <= kMax && k <= kMax, InvalidArgument, "gemm: dimensions (", m, ", ",
                n, ", ", k, ") exceed the BLAS int range");
}

// c (M, N) = alpha * (the `chunks` partial products (M, N) summed in chunk order) + beta * c.
void sum_partials(float* c, const float* partial, std::int64_t chunks, std::int64_t total,
                  float alpha, float beta) {
#pragma omp parallel for schedule(static) if (total >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < total; ++i) {
    float sum = 0.0f;
    for (std::int64_t q = 0; q < chunks; ++q) sum += partial[q * total + i];
    c[i] = beta == 0.0f ? alpha * sum : alpha * sum + beta * c[i];
  }
}

// body(q, scratch) for q in [0, count) over the OpenMP team, each thread with its own f32 scratch
// of `floats` values; the first exception is rethrown once the team is done.
template <class Body>
void for_each_with_scratch(std::int64_t count, std::int64_t floats, Body body) {
  std::exception_ptr error;
#pragma omp parallel if (count > 1)
  {
    std::vector<float> scratch;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t q = 0; q < count; ++q) {
      try {
        scratch.resize(static_cast<std::size_t>(floats));
        body(q, scratch.data());
      } catch (...) {
#pragma omp critical(tessera_gemm_scratch)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

// c (M, N) = alpha op(a) op(b) + beta c. Parallel over the OpenMP team in one of three ways:
// fixed slabs of kGemmSlabRows rows of c when M is large (the forward X W of every layer), else
// fixed K-chunks whose partial products are summed in chunk order (the weight gradients X^T dY,
// M = F_in small and K = nodes large), else one call. Slabs and K-chunks depend on the shape
// alone, so results do not depend on the thread count. (Slabs of columns would not do:
// OpenBLAS's blocking changes with the slab width.)
void gemm(float* c, const float* a, bool trans_a, const float* b, bool trans_b, float alpha,
          float beta, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS rejects a zero leading dimension; c = beta * c (beta 0 overwrites NaN)
    const std::int64_t total = m * n;
    for (std::int64_t i = 0; i < total; ++i) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return;
  }
  check_blas_dims(m, n, k);
  pin_blas_to_one_thread();
  // Row-major: a stored (M, K) or, transposed, (K, M); its leading dimension is its column count.
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  const int ldc = static_cast<int>(n);
  // The choice of method depends on the shape alone, never on the thread count.
  const std::int64_t chunks = std::min(kMaxChunks, k / kMinChunkK);
  if (m >= kGemmSlabRows) {
    const std::int64_t slabs = (m + kGemmSlabRows - 1) / kGemmSlabRows;
#pragma omp parallel for schedule(dynamic, 1) if (m * n * k >= kSerialFlops)
    for (std::int64_t q = 0; q < slabs; ++q) {
      const std::int64_t m0 = q * kGemmSlabRows, m1 = std::min(m, m0 + kGemmSlabRows);
      // Rows m0.. of op(a): rows of a, or columns of a when it is transposed.
      const float* a_slab = trans_a ? a + m0 : a + m0 * lda;
      sgemm(a_slab, lda, trans_a, b, ldb, trans_b, c + m0 * ldc, ldc, m1 - m0, n, k, alpha, beta);
    }
  } else if (chunks >= 2) {
    std::vector<float> partial(static_cast<std::size_t>(chunks * m * n));  // (chunks, M, N)
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t q = 0; q < chunks; ++q) {
      const std::int64_t k0 = k * q / chunks, k1 = k * (q + 1) / chunks;
      // Columns k0.. of op(a) and rows k0.. of op(b).
      const float* a_part = trans_a ? a + k0 * lda : a + k0;
      const float* b_part = trans_b ? b + k0 : b + k0 * ldb;
      sgemm(a_part, lda, trans_a, b_part, ldb, trans_b, partial.data() + q * m * n, ldc, m, n,
            k1 - k0, 1.0f, 0.0f);
    }
    sum_partials(c, partial.data(), chunks, m * n, alpha, beta);
  } else {
    sgemm(a, lda, trans_a, b, ldb, trans_b, c, ldc, m, n, k, alpha, beta);
  }
}

void gemm_bf16_a(float* c, const std::uint16_t* a, bool trans_a, const float* b, bool trans_b,
                 float alpha, float beta, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m == 0 || n == 0) return;
  check_blas_dims(m, n, k);
  const std::int64_t stored = trans_a ? k : m, width = trans_a ? m : k;  // a as stored
  if (stored < kGemmSlabRows || k == 0) {  // under one slab: gemm's own way
    std::vector<float> wide(static_cast<std::size_t>(stored * width));
    from_bf16(wide.data(), a, stored * width);
    return gemm(c, wide.data(), trans_a, b, trans_b, alpha, beta, m, n, k);
  }
  pin_blas_to_one_thread();
  const std::int64_t slabs = (stored + kGemmSlabRows - 1) / kGemmSlabRows;
  auto widen_slab = [&](std::int64_t q, float* wide) {  // returns the slab's first stored row
    const std::int64_t r0 = q * kGemmSlabRows, rows = std::min(stored, r0 + kGemmSlabRows) - r0;
    from_bf16(wide, a + r0 * width, rows * width);
    return std::pair{r0, rows};
  };
  const int ldb = static_cast<int>(trans_b ? k : n), ldc = static_cast<int>(n);
  if (!trans_a) {  // c's rows, a slab of gemm at a time
    for_each_with_scratch(slabs, kGemmSlabRows * k, [&](std::int64_t q, float* wide) {
      const auto [m0, rows] = widen_slab(q, wide);
      sgemm(wide, static_cast<int>(k), false, b, ldb, trans_b, c + m0 * n, ldc, rows, n, k, alpha,
            beta);
    });
    return;
  }
  // c = alpha * sum over the K slabs of slabᵀ b[slab] + beta * c: fixed groups of consecutive
  // slabs, each summed into its partial in slab order, the partials in group order.
  const std::int64_t groups = std::min(kMaxChunks, slabs);
  std::vector<float> partial(static_cast<std::size_t>(groups * m * n));
  for_each_with_scratch(groups, kGemmSlabRows * m, [&](std::int64_t g, float* wide) {
    const std::int64_t first = slabs * g / groups, end = slabs * (g + 1) / groups;
    for (std::int64_t q = first; q < end; ++q) {
      const auto [k0, rows] = widen_slab(q, wide);
      sgemm(wide, static_cast<int>(m), true, b + k0 * n, ldb, false, partial.data() + g * m * n,
            ldc, m, n, rows, 1.0f, q == first ? 0.0f : 1.0f);
    }
  });
  sum_partials(c, partial.data(), groups, m * n, alpha, beta);
}

void gemm_bf16_c(std::uint16_t* c, const float* a, const float* b, bool trans_b, float alpha,
                 std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m == 0 || n == 0) return;
  check_blas_dims(m, n, k);
  if (m < kGemmSlabRows || k == 0) {  // under one slab: gemm's own way, then rounded
    std::vector<float> out(static_cast<std::size_t>(m * n));
    gemm(out.data(), a, false, b, trans_b, alpha, 0.0f, m, n, k);
    return to_bf16(c, out.data(), m * n);
  }
  pin_blas_to_one_thread();
  const std::int64_t slabs = (m + kGemmSlabRows - 1) / kGemmSlabRows;
  for_each_with_scratch(slabs, kGemmSlabRows * n, [&](std::int64_t q, float* block) {
    const std::int64_t m0 = q * kGemmSlabRows, rows = std::min(m, m0 + kGemmSlabRows) - m0;
    sgemm(a + m0 * k, static_cast<int>(k), false, b, static_cast<int>(trans_b ? k : n), trans_b,
          block, static_cast<int>(n), rows, n, k, alpha, 0.0f);
    to_bf16(c + m0 * n, block, rows * n);
  });
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

void add_doubles(float* out, const double* values, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] += static_cast<float>(values[i]);
}

void adam_update(float* params, float* m, float* v, const float* grads, const float* decay,
                 const AdamStep& step, std::int64_t n) {
  const float b1 = step.beta1, b2 = step.beta2, eps = step.eps;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = grads[i] + decay[i] * params[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    params[i] -= step.step_size * m[i] / (std::sqrt(v[i]) * step.inv_sqrt_bias2 + eps);
  }
}

}  // namespace tessera::cpu::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
