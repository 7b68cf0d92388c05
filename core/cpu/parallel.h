// SPDX-License-Identifier: Apache-2.0
// OpenMP helpers shared by the CPU kernels: the amount of work below which a loop stays on the
// calling thread, and a reduction over rows in a fixed block order, so that sums (column sums,
// loss sums, batch-norm statistics) do not depend on the number of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cpu/cpu_level.h"

// In each level's namespace and target region, like the kernels that use it.
TESSERA_CPU_TARGET_BEGIN
namespace tessera::cpu::TESSERA_CPU_NS::detail {

// Loops touching fewer elements than this run serially (a parallel region costs ~µs).
inline constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 15;

// Rows per reduction block: a function of the row count only (never of the thread count).
inline std::int64_t reduce_block_rows(std::int64_t rows) {
  return std::max<std::int64_t>(1024, (rows + 255) / 256);
}

// sums (width) = the sum over r in [0, rows) of what add_row(acc, r) adds to acc (width
// doubles). Each block of rows is summed in row order into its own partial, then the partials
// are added in block order.
template <class AddRow>
void reduce_rows(double* sums, std::int64_t width, std::int64_t rows, AddRow add_row) {
  std::fill(sums, sums + width, 0.0);
  const std::int64_t block = reduce_block_rows(rows);
  const std::int64_t num_blocks = (rows + block - 1) / block;
  if (num_blocks <= 1) {
    for (std::int64_t r = 0; r < rows; ++r) add_row(sums, r);
    return;
  }
  std::vector<double> partial(static_cast<std::size_t>(num_blocks * width), 0.0);
#pragma omp parallel for schedule(static) if (rows * width >= kParallelMinWork)
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    double* acc = partial.data() + b * width;
    const std::int64_t end = std::min(rows, (b + 1) * block);
    for (std::int64_t r = b * block; r < end; ++r) add_row(acc, r);
  }
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const double* acc = partial.data() + b * width;
    for (std::int64_t w = 0; w < width; ++w) sums[w] += acc[w];
  }
}

}  // namespace tessera::cpu::TESSERA_CPU_NS::detail
TESSERA_CPU_TARGET_END
