// SPDX-License-Identifier: Apache-2.0
// CPU CSR SpMM: out = A * x. Rows run in parallel (OpenMP) over blocks of equal work (edges +
// rows), taken dynamically because degrees follow a power law. Each row is summed into a zeroed
// accumulator in edge order, so results are bitwise independent of the thread count. Widths up
// to 32 are compile-time (accumulator in registers); wider rows go in 32-column slices. Rows of
// x are prefetched a few KiB ahead, since the gather is bound by memory latency, into L1 or L2
// (spmm_prefetch_target, core/cpu/dispatch.h). x is f32 or
// bf16 (uint16_t bits, widened exactly to f32 as it is read): the same sums in the same order.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "core/cpu/dispatch.h"
#include "core/cpu/kernels_cpu.h"
#include "core/cpu/parallel.h"
#include "core/half_float_bits.h"

TESSERA_CPU_TARGET_BEGIN
namespace tessera::cpu::TESSERA_CPU_NS {
namespace {

// Rows of x requested ahead of use: about this many bytes per thread in flight, which covers
// DRAM latency without flooding the miss buffers; clamped to [4, 32] edges.
constexpr std::int64_t kPrefetchBytes = 4096;

template <class T>
EdgeOffset prefetch_distance(std::int64_t f) {
  return std::clamp<std::int64_t>(kPrefetchBytes / (f * std::int64_t{sizeof(T)}), 4, 32);
}

// Where the prefetch of edge j + distance may look: up to (not including) `end`; into L2 only
// (prefetcht1) or into L1 as well (prefetcht0).
struct Prefetch {
  EdgeOffset end;
  EdgeOffset distance;
  bool into_l2;
};

template <class T>
inline void prefetch_row(const T* row, std::int64_t f, bool into_l2) {
  const char* bytes = reinterpret_cast<const char*>(row);
  const std::int64_t size = f * std::int64_t{sizeof(T)};
  if (into_l2) {
    for (std::int64_t b = 0; b < size; b += 64) __builtin_prefetch(bytes + b, 0, 2);
  } else {
    for (std::int64_t b = 0; b < size; b += 64) __builtin_prefetch(bytes + b, 0, 3);
  }
}

// Eight floats as one GCC vector, one register from AVX up (the baseline keeps the scalar loop:
// there the vectors would be split into slower pieces). Lanes are independent, so the vectors
// give the same bits as the scalar loop.
typedef float Float8 __attribute__((vector_size(32)));
// (__AVX__: a native build of a level-0 source for a CPU that has it.)
#if TESSERA_CPU_LEVEL >= 1 || defined(__AVX__)
constexpr bool kVectorTiles = true;
#else
constexpr bool kVectorTiles = false;
#endif

// v = eight values of x's row at p as floats: f32 as they are, bf16 widened (its bits are the
// f32's upper half, so the widening is exact). (An output argument: a vector return value would
// change the ABI at the baseline level.)
inline void load8(Float8& v, const float* p) { std::memcpy(&v, p, sizeof v); }
typedef std::uint16_t Half8 __attribute__((vector_size(16)));
typedef std::uint32_t Word8 __attribute__((vector_size(32)));
inline void load8(Float8& v, const std::uint16_t* p) {
  Half8 h;
  std::memcpy(&h, p, sizeof h);
  const Word8 w = __builtin_convertvector(h, Word8) << 16;
  std::memcpy(&v, &w, sizeof v);
}
inline float to_float(float v) { return v; }
inline float to_float(std::uint16_t h) { return ::tessera::detail::half_bits::bf16_to_f32(h); }

// out_tile (kTile) = sum_j w_j * x[idx[j], 0:kTile] for j in [begin, end), in edge order, with
// the accumulator in registers; rows of x are `stride` values apart (the tile may be a slice).
// From AVX up, tiles of a multiple of 8 accumulate in Float8 vectors: the compiler keeps those in
// registers whatever its tuning, where it may spill a float array of 32 to the stack at every
// edge (measured: 2x slower at 256 columns with GCC's generic tuning).
template <bool kWeighted, int kTile, class T>
inline void aggregate_tile(float* __restrict out_tile, const T* __restrict x, std::int64_t stride,
                           const NodeId* __restrict idx, const float* __restrict val,
                           EdgeOffset begin, EdgeOffset end, Prefetch prefetch) {
  if constexpr (kTile % 8 == 0 && kVectorTiles) {
    constexpr int kVectors = kTile / 8;
    Float8 acc[kVectors] = {};
    for (EdgeOffset j = begin; j < end; ++j) {
      if (j < prefetch.end) {
        prefetch_row(x + std::int64_t{idx[j + prefetch.distance]} * stride, stride,
                     prefetch.into_l2);
      }
      const T* __restrict x_row = x + std::int64_t{idx[j]} * stride;
      for (int v = 0; v < kVectors; ++v) {
        Float8 row;
        load8(row, x_row + 8 * v);
        if constexpr (kWeighted) {
          acc[v] += val[j] * row;
        } else {
          acc[v] += row;
        }
      }
    }
    std::memcpy(out_tile, acc, sizeof acc);
  } else {
    float acc[kTile] = {};
    for (EdgeOffset j = begin; j < end; ++j) {
      if (j < prefetch.end) {
        prefetch_row(x + std::int64_t{idx[j + prefetch.distance]} * stride, stride,
                     prefetch.into_l2);
      }
      const T* __restrict x_row = x + std::int64_t{idx[j]} * stride;
      if constexpr (kWeighted) {
        const float w = val[j];
        for (int k = 0; k < kTile; ++k) acc[k] += w * to_float(x_row[k]);
      } else {
        for (int k = 0; k < kTile; ++k) acc[k] += to_float(x_row[k]);
      }
    }
    for (int k = 0; k < kTile; ++k) out_tile[k] = acc[k];
  }
}

constexpr int kMaxTile = 32;
template <class T>
using TileFn = void (*)(float*, const T*, std::int64_t, const NodeId*, const float*, EdgeOffset,
                        EdgeOffset, Prefetch);

// kTileTable<kWeighted, T>[w] = aggregate_tile<kWeighted, w, T> for w in 1..kMaxTile.
template <bool kWeighted, class T, int... kTiles>
constexpr std::array<TileFn<T>, kMaxTile + 1> make_tile_table(
    std::integer_sequence<int, kTiles...>) {
  return {nullptr, &aggregate_tile<kWeighted, kTiles + 1, T>...};
}
template <bool kWeighted, class T>
constexpr std::array<TileFn<T>, kMaxTile + 1> kTileTable =
    make_tile_table<kWeighted, T>(std::make_integer_sequence<int, kMaxTile>{});

// out_row (F) = sum_j w_j * x[idx[j]]: kWidth = F when F <= kMaxTile, else 0 and the row is
// done in slices of kMaxTile columns plus one narrower slice (each slice re-reads the row's
// edges, which are in L1 by then). Only the first slice prefetches (whole rows).
template <bool kWeighted, int kWidth, class T>
inline void aggregate_row(float* out_row, const T* x, const NodeId* idx, const float* val,
                          EdgeOffset begin, EdgeOffset end, Prefetch prefetch, std::int64_t f) {
  if constexpr (kWidth > 0) {
    aggregate_tile<kWeighted, kWidth>(out_row, x, kWidth, idx, val, begin, end, prefetch);
  } else {
    const Prefetch none = {-1, 0, false};
    std::int64_t c0 = 0;
    for (; c0 + kMaxTile <= f; c0 += kMaxTile) {
      aggregate_tile<kWeighted, kMaxTile>(out_row + c0, x + c0, f, idx, val, begin, end,
                                          c0 == 0 ? prefetch : none);
    }
    if (c0 < f) {
      kTileTable<kWeighted, T>[f - c0](out_row + c0, x + c0, f, idx, val, begin, end, none);
    }
  }
}

// Splits rows [0, R) into blocks of about equal work (edges + rows), as row boundaries.
std::vector<std::int64_t> balanced_row_blocks(const CsrView& a, std::int64_t num_blocks) {
  const EdgeOffset total = a.nnz() + a.num_rows;
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(num_blocks) + 1, a.num_rows);
  bounds[0] = 0;
  std::int64_t lo = 0;
  for (std::int64_t b = 1; b < num_blocks; ++b) {
    const EdgeOffset target = total * b / num_blocks;
    std::int64_t hi = a.num_rows;  // first row r with indptr[r] + r >= target
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (a.indptr[mid] + mid < target) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    bounds[static_cast<std::size_t>(b)] = lo;
  }
  return bounds;
}

template <class T>
Prefetch make_prefetch(const CsrView& a, std::int64_t f) {
  const EdgeOffset distance = prefetch_distance<T>(f);
  return {a.nnz() - distance, distance, spmm_prefetch_target() == PrefetchTarget::L2};
}

template <bool kWeighted, int kWidth, class T>
void spmm_all(float* out, const CsrView& a, const T* x, std::int64_t f) {
  const Prefetch prefetch = make_prefetch<T>(a, f);
  const bool parallel = (a.nnz() + a.num_rows) * f >= detail::kParallelMinWork;
  const int threads = parallel ? omp_get_max_threads() : 1;
  // Several blocks per thread so that a block holding a hub does not hold up the others.
  const std::int64_t num_blocks =
      std::max<std::int64_t>(1, std::min<std::int64_t>(a.num_rows, std::int64_t{threads} * 16));
  const std::vector<std::int64_t> bounds = balanced_row_blocks(a, num_blocks);
#pragma omp parallel for schedule(dynamic, 1) if (threads > 1)
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    for (std::int64_t r = bounds[static_cast<std::size_t>(b)];
         r < bounds[static_cast<std::size_t>(b) + 1]; ++r) {
      aggregate_row<kWeighted, kWidth>(out + r * f, x, a.indices, a.values, a.indptr[r],
                                       a.indptr[r + 1], prefetch, f);
    }
  }
}

template <bool kWeighted, int kWidth, class T>
void spmm_listed(float* out, const CsrView& a, const T* x, std::span<const NodeId> rows,
                 std::int64_t f) {
  const Prefetch prefetch = make_prefetch<T>(a, f);
  const auto n = static_cast<std::int64_t>(rows.size());
  // Work estimate from the average degree; the rows themselves are not scanned.
  const std::int64_t avg_degree = a.num_rows ? a.nnz() / a.num_rows + 1 : 1;
  const bool parallel = n * avg_degree * f >= detail::kParallelMinWork;
  const int threads = parallel ? omp_get_max_threads() : 1;
  const std::int64_t chunk = std::max<std::int64_t>(16, n / (std::int64_t{threads} * 64));
#pragma omp parallel for schedule(dynamic, chunk) if (threads > 1)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = rows[static_cast<std::size_t>(i)];
    aggregate_row<kWeighted, kWidth>(out + r * f, x, a.indices, a.values, a.indptr[r],
                                     a.indptr[r + 1], prefetch, f);
  }
}

// Calls body.template operator()<kWeighted, kWidth>() with kWidth = f for f in 1..kMaxTile,
// else kWidth = 0 (sliced rows).
template <bool kWeighted, class Body, int... kWidths>
void with_width(std::int64_t f, Body& body, std::integer_sequence<int, kWidths...>) {
  const bool fixed =
      ((f == kWidths + 1 ? (body.template operator()<kWeighted, kWidths + 1>(), true) : false) ||
       ...);
  if (!fixed) body.template operator()<kWeighted, 0>();
}

template <class Body>
void dispatch_width(bool weighted, std::int64_t f, Body&& body) {
  if (weighted) {
    with_width<true>(f, body, std::make_integer_sequence<int, kMaxTile>{});
  } else {
    with_width<false>(f, body, std::make_integer_sequence<int, kMaxTile>{});
  }
}

template <class T>
void spmm_of(float* out, const CsrView& a, const T* x, std::int64_t f) {
  if (a.num_rows == 0 || f == 0) return;
  dispatch_width(a.values != nullptr, f,
                 [&]<bool kWeighted, int kWidth>() { spmm_all<kWeighted, kWidth>(out, a, x, f); });
}

template <class T>
void spmm_rows_of(float* out, const CsrView& a, const T* x, std::span<const NodeId> rows,
                  std::int64_t f) {
  if (rows.empty() || f == 0) return;
  dispatch_width(a.values != nullptr, f, [&]<bool kWeighted, int kWidth>() {
    spmm_listed<kWeighted, kWidth>(out, a, x, rows, f);
  });
}

}  // namespace

void spmm(float* out, const CsrView& a, const float* x, std::int64_t f) { spmm_of(out, a, x, f); }

void spmm_rows(float* out, const CsrView& a, const float* x, std::span<const NodeId> rows,
               std::int64_t f) {
  spmm_rows_of(out, a, x, rows, f);
}

void spmm_bf16(float* out, const CsrView& a, const std::uint16_t* x, std::int64_t f) {
  spmm_of(out, a, x, f);
}

void spmm_rows_bf16(float* out, const CsrView& a, const std::uint16_t* x,
                    std::span<const NodeId> rows, std::int64_t f) {
  spmm_rows_of(out, a, x, rows, f);
}

}  // namespace tessera::cpu::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
