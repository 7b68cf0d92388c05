// SPDX-License-Identifier: Apache-2.0
// CPU row movement for halo exchange: gather listed rows (f32, or bf16 widened) into a packed
// block, scatter a packed block onto listed (distinct) rows, and scatter-add one back onto
// listed rows. Scatter-add keeps list order even
// when rows repeat by giving each thread a band of columns (cache-line aligned) instead of a
// range of rows.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/cpu/kernels_cpu.h"
#include "core/cpu/parallel.h"
#include "core/half_float_bits.h"

TESSERA_CPU_TARGET_BEGIN
namespace tessera::cpu::TESSERA_CPU_NS {
namespace {

// out[rows[i], c0:c1] += x[i, c0:c1] for every i, in list order.
void scatter_add_band(float* out, const float* x, std::span<const NodeId> rows, std::int64_t f,
                      std::int64_t c0, std::int64_t c1) {
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
  for (std::int64_t i = 0; i < n; ++i) {
    float* out_row = out + std::int64_t{rows[static_cast<std::size_t>(i)]} * f;
    const float* x_row = x + i * f;
    for (std::int64_t k = c0; k < c1; ++k) out_row[k] += x_row[k];
  }
}

}  // namespace

void gather_rows(float* out, const float* x, std::span<const NodeId> rows, std::int64_t f) {
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
  if (f == 0) return;
  const std::size_t row_bytes = static_cast<std::size_t>(f) * sizeof(float);
#pragma omp parallel for schedule(static) if (n * f >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(out + i * f, x + std::int64_t{rows[static_cast<std::size_t>(i)]} * f, row_bytes);
  }
}

void scatter_rows(float* out, const float* x, std::span<const NodeId> rows, std::int64_t f) {
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
  if (f == 0) return;
  const std::size_t row_bytes = static_cast<std::size_t>(f) * sizeof(float);
#pragma omp parallel for schedule(static) if (n * f >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(out + std::int64_t{rows[static_cast<std::size_t>(i)]} * f, x + i * f, row_bytes);
  }
}

void gather_rows_bf16(float* out, const std::uint16_t* x, std::span<const NodeId> rows,
                      std::int64_t f) {
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(static) if (n * f >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t* row = x + std::int64_t{rows[static_cast<std::size_t>(i)]} * f;
    for (std::int64_t k = 0; k < f; ++k)
      out[i * f + k] = ::tessera::detail::half_bits::bf16_to_f32(row[k]);
  }
}

void scatter_add_rows(float* out, const float* x, std::span<const NodeId> rows, std::int64_t f) {
  constexpr std::int64_t kBand = 16;  // floats per 64-byte cache line
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
  if (n * f < detail::kParallelMinWork || f < 2 * kBand) {
    scatter_add_band(out, x, rows, f, 0, f);
    return;
  }
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads();
    const std::int64_t lines = (f + kBand - 1) / kBand;
    const std::int64_t per_thread = (lines + threads - 1) / threads * kBand;
    const std::int64_t c0 = std::min(f, omp_get_thread_num() * per_thread);
    const std::int64_t c1 = std::min(f, c0 + per_thread);
    if (c0 < c1) scatter_add_band(out, x, rows, f, c0, c1);
  }
}

}  // namespace tessera::cpu::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
