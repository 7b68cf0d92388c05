// SPDX-License-Identifier: Apache-2.0
// CPU fused elementwise kernels: bias + activation and inverted dropout, forward and backward;
// the rounding of f32 values to bf16.
// Outputs may alias inputs (each element is read before it is written). ReLU keeps NaN inputs
// NaN so that divergence is visible. The dropout mask is recomputed from CounterRng, never
// stored: one Philox block gives the draws of 4 features.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cpu/kernels_cpu.h"
#include "core/cpu/parallel.h"
#include "core/half_float_bits.h"

#if TESSERA_CPU_LEVEL >= 2
#include <immintrin.h>
#endif

TESSERA_CPU_TARGET_BEGIN
namespace tessera::cpu::TESSERA_CPU_NS {
namespace {

inline float relu(float v) { return v < 0.0f ? 0.0f : v; }

// d_row (F) = d_y_row * act'(y_row).
inline void act_backward_row(float* d_row, const float* d_y_row, const float* y_row, Activation act,
                             std::int64_t f) {
  if (act == Activation::Relu) {
    for (std::int64_t k = 0; k < f; ++k) d_row[k] = y_row[k] > 0.0f ? d_y_row[k] : 0.0f;
  } else if (act == Activation::Elu) {  // y' = 1 for y > 0, else exp(x) = y + 1
    for (std::int64_t k = 0; k < f; ++k)
      d_row[k] = y_row[k] > 0.0f ? d_y_row[k] : d_y_row[k] * (y_row[k] + 1.0f);
  } else {
    for (std::int64_t k = 0; k < f; ++k) d_row[k] = d_y_row[k];
  }
}

// keep ? value * scale : 0 with keep = to_unit_float(word) >= p. Branch-free (a random keep
// mispredicts half the time): a dropped value becomes +0 through a bit mask, so NaN or inf
// inputs are dropped too.
inline float masked(float value, std::uint32_t word, float p, float scale) {
  const std::uint32_t keep_bits = to_unit_float(word) >= p ? ~0u : 0u;
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(value * scale) & keep_bits);
}

#if TESSERA_CPU_LEVEL >= 2
// (lo, hi) halves of the eight 32 x 32 -> 64-bit products m * a[i]: vpmuludq takes the even
// lanes, and the odd lanes shifted down.
inline void mulhilo8(__m256i a, __m256i m, __m256i& lo, __m256i& hi) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// CounterRng::words(item, block + i) for the eight blocks i in [0, 8), lane by lane: the same
// Philox-4x32-10 rounds in 32-bit lanes. w[k][i] is word k of block block + i.
inline void philox_words8(std::uint64_t key, std::uint64_t item, std::uint32_t block,
                          std::uint32_t (&w)[4][8]) {
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(block)),
                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i c1 = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(item)));
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(item >> 32)));
  __m256i c3 = _mm256_set1_epi32(static_cast<int>(0x7E55E7A1u));
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u), m1 = _mm256_set1_epi64x(0xCD9E8D57u);
  auto k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    __m256i lo0, hi0, lo1, hi1;
    mulhilo8(c0, m0, lo0, hi0);
    mulhilo8(c2, m1, lo1, hi1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c1 = lo1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[0]), c0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[1]), c1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[2]), c2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[3]), c3);
}
#endif

#if TESSERA_CPU_LEVEL >= 3
// mulhilo8 in sixteen lanes. The zero-masked forms with every lane selected: GCC 12 warns that
// the unmasked ones' _mm512_undefined source "may be used uninitialized".
inline void mulhilo16(__m512i a, __m512i m, __m512i& lo, __m512i& hi) {
  constexpr __mmask8 kAll = 0xFF;
  const __m512i even = _mm512_maskz_mul_epu32(kAll, a, m);
  const __m512i odd = _mm512_maskz_mul_epu32(kAll, _mm512_maskz_srli_epi64(kAll, a, 32), m);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_maskz_slli_epi64(kAll, odd, 32));
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_maskz_srli_epi64(kAll, even, 32), odd);
}

// The keep bits of the 64 features of blocks [block, block + 16): bit j for feature
// 4 * block + j, set when to_unit_float(word) >= p, i.e. when word >> 8 >= threshold =
// ceil(p * 2^24) (both sides are exact: 24-bit integers scaled by a power of two). Sixteen
// Philox blocks in the lanes of one vector; word k of lane i is feature 4 i + k, so each word's
// 16-bit compare mask is spread to every fourth bit (pdep).
inline std::uint64_t keep_bits64(std::uint64_t key, std::uint64_t item, std::uint32_t block,
                                 std::uint32_t threshold) {
  __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(block)),
                                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                                  14, 15));
  __m512i c1 = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(item)));
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(item >> 32)));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>(0x7E55E7A1u));
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
  auto k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    __m512i lo0, hi0, lo1, hi1;
    mulhilo16(c0, m0, lo0, hi0);
    mulhilo16(c2, m1, lo1, hi1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c1 = lo1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const __m512i t = _mm512_set1_epi32(static_cast<int>(threshold));
  const __m512i words[4] = {c0, c1, c2, c3};
  std::uint64_t bits = 0;
  for (int k = 0; k < 4; ++k) {
    const __mmask16 keep =
        _mm512_cmpge_epu32_mask(_mm512_maskz_srli_epi32(0xFFFF, words[k], 8), t);
    bits |= _pdep_u64(keep, 0x1111111111111111ull << k);
  }
  return bits;
}
#endif

// out (R, F) = keep ? in * scale : 0, keep = rng.uniform(global_ids[r], f) >= p: feature f uses
// word f % 4 of block f / 4. From AVX2 on, eight blocks (32 features) at a time run the Philox
// rounds in the lanes of one vector (philox_words8: the same words; a 66-layer GCNII epoch on
// Cora, 64 wide, spent 42 ms in dropout masks with one call per block and 9 ms with this); with
// AVX-512 first sixteen blocks (64 features) at a time, as keep bits applied by masked
// multiplies; then, and below AVX2, one Philox call per block of 4 features (the compiler
// turns a lane-parallel batch written in plain C++ into slow 64-bit vector multiplies).
void apply_dropout_mask(float* out, const float* in, float p, const CounterRng& rng,
                        const GlobalId* global_ids, std::int64_t r, std::int64_t f) {
  const float scale = 1.0f / (1.0f - p);
#if TESSERA_CPU_LEVEL >= 3
  const auto threshold = static_cast<std::uint32_t>(std::ceil(p * 16777216.0f));
#endif
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork / 8)
  for (std::int64_t row = 0; row < r; ++row) {
    const auto id = static_cast<std::uint64_t>(global_ids[row]);
    const float* in_row = in + row * f;
    float* out_row = out + row * f;
    const CounterRng local = rng;  // a private copy keeps the key in registers
    std::int64_t f0 = 0;
#if TESSERA_CPU_LEVEL >= 3
    const __m512 vscale = _mm512_set1_ps(scale);
    for (; f0 + 64 <= f; f0 += 64) {
      const std::uint64_t keep =
          keep_bits64(local.key(), id, static_cast<std::uint32_t>(f0 >> 2), threshold);
      for (int j = 0; j < 4; ++j) {
        const __m512 v = _mm512_loadu_ps(in_row + f0 + 16 * j);
        _mm512_storeu_ps(out_row + f0 + 16 * j,
                         _mm512_maskz_mul_ps(static_cast<__mmask16>(keep >> (16 * j)), v, vscale));
      }
    }
#endif
#if TESSERA_CPU_LEVEL >= 2
    for (; f0 + 32 <= f; f0 += 32) {
      std::uint32_t w[4][8];
      philox_words8(local.key(), id, static_cast<std::uint32_t>(f0 >> 2), w);
      for (int i = 0; i < 8; ++i)
        for (int k = 0; k < 4; ++k)
          out_row[f0 + 4 * i + k] = masked(in_row[f0 + 4 * i + k], w[k][i], p, scale);
    }
#endif
    for (; f0 + 4 <= f; f0 += 4) {
      const auto words = local.words(id, static_cast<std::uint32_t>(f0 >> 2));
      for (int k = 0; k < 4; ++k) out_row[f0 + k] = masked(in_row[f0 + k], words[k], p, scale);
    }
    if (f0 < f) {
      const auto words = local.words(id, static_cast<std::uint32_t>(f0 >> 2));
      for (int k = 0; f0 + k < f; ++k) out_row[f0 + k] = masked(in_row[f0 + k], words[k], p, scale);
    }
  }
}

void copy_if_distinct(float* out, const float* in, std::int64_t n) {
  if (out == in) return;
#pragma omp parallel for simd schedule(static) if (n >= detail::kParallelMinWork * 8)
  for (std::int64_t i = 0; i < n; ++i) out[i] = in[i];
}

}  // namespace

void bias_act_forward(float* y, const float* x, const float* bias, Activation act, std::int64_t r,
                      std::int64_t f) {
  const bool use_relu = act == Activation::Relu;
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork)
  for (std::int64_t row = 0; row < r; ++row) {
    const float* x_row = x + row * f;
    float* y_row = y + row * f;
    if (act == Activation::Elu) {
      for (std::int64_t k = 0; k < f; ++k) {
        const float v = bias ? x_row[k] + bias[k] : x_row[k];
        y_row[k] = v > 0.0f ? v : std::expm1(v);
      }
    } else if (bias && use_relu) {
      for (std::int64_t k = 0; k < f; ++k) y_row[k] = relu(x_row[k] + bias[k]);
    } else if (bias) {
      for (std::int64_t k = 0; k < f; ++k) y_row[k] = x_row[k] + bias[k];
    } else if (use_relu) {
      for (std::int64_t k = 0; k < f; ++k) y_row[k] = relu(x_row[k]);
    } else if (y_row != x_row) {
      for (std::int64_t k = 0; k < f; ++k) y_row[k] = x_row[k];
    }
  }
}

void bias_act_backward(float* d_x, float* d_bias, const float* d_y, const float* y, Activation act,
                       std::int64_t r, std::int64_t f) {
  if (!d_bias) {
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork)
    for (std::int64_t row = 0; row < r; ++row) {
      act_backward_row(d_x + row * f, d_y + row * f, y + row * f, act, f);
    }
    return;
  }
  // Fused: each row's d_x is computed and added to its block's column sums in one pass.
  std::vector<double> sums(static_cast<std::size_t>(f));
  detail::reduce_rows(sums.data(), f, r, [&](double* acc, std::int64_t row) {
    float* d_row = d_x + row * f;
    act_backward_row(d_row, d_y + row * f, y + row * f, act, f);
    for (std::int64_t k = 0; k < f; ++k) acc[k] += d_row[k];
  });
  for (std::int64_t k = 0; k < f; ++k) d_bias[k] += static_cast<float>(sums[k]);
}

void dropout_forward(float* y, const float* x, float p, const CounterRng& rng,
                     const GlobalId* global_ids, std::int64_t r, std::int64_t f) {
  if (p == 0.0f) return copy_if_distinct(y, x, r * f);  // every draw is >= 0: all kept
  apply_dropout_mask(y, x, p, rng, global_ids, r, f);
}

void dropout_backward(float* d_x, const float* d_y, float p, const CounterRng& rng,
                      const GlobalId* global_ids, std::int64_t r, std::int64_t f) {
  if (p == 0.0f) return copy_if_distinct(d_x, d_y, r * f);
  apply_dropout_mask(d_x, d_y, p, rng, global_ids, r, f);
}

// One row of positive_bits from feature `from` (a multiple of 8) on.
inline void positive_bits_tail(std::uint8_t* b_row, const float* y_row, std::int64_t from,
                               std::int64_t f) {
  for (std::int64_t byte = from / 8; 8 * byte < f; ++byte) {
    const std::int64_t end = std::min<std::int64_t>(8, f - 8 * byte);
    unsigned word = 0;
    for (std::int64_t k = 0; k < end; ++k)
      word |= static_cast<unsigned>(y_row[8 * byte + k] > 0.0f) << k;
    b_row[byte] = static_cast<std::uint8_t>(word);
  }
}

// One row of positive_bits: a vector compare gives 16 (AVX-512) or 8 (AVX2) bits at once, in
// lane order, which is the bit order; the rest one byte at a time. NaN is not > 0 either way.
inline void positive_bits_row(std::uint8_t* b_row, const float* y_row, std::int64_t f) {
  std::int64_t k = 0;
#if TESSERA_CPU_LEVEL >= 3
  for (; k + 16 <= f; k += 16) {
    const __mmask16 m =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(y_row + k), _mm512_setzero_ps(), _CMP_GT_OQ);
    const auto word = static_cast<std::uint16_t>(m);
    std::memcpy(b_row + k / 8, &word, sizeof word);  // little-endian: features k..k+7 first
  }
#elif TESSERA_CPU_LEVEL >= 2
  for (; k + 8 <= f; k += 8) {
    const __m256 gt = _mm256_cmp_ps(_mm256_loadu_ps(y_row + k), _mm256_setzero_ps(), _CMP_GT_OQ);
    b_row[k / 8] = static_cast<std::uint8_t>(_mm256_movemask_ps(gt));
  }
#endif
  positive_bits_tail(b_row, y_row, k, f);
}

// One row of relu_backward_bits: d_y where the bit is set, else +0 (as the scalar select).
inline void relu_backward_bits_row(float* d_row, const float* d_y_row, const std::uint8_t* b_row,
                                   std::int64_t f) {
  std::int64_t k = 0;
#if TESSERA_CPU_LEVEL >= 3
  for (; k + 16 <= f; k += 16) {
    std::uint16_t word;
    std::memcpy(&word, b_row + k / 8, sizeof word);
    _mm512_storeu_ps(
        d_row + k, _mm512_maskz_mov_ps(static_cast<__mmask16>(word), _mm512_loadu_ps(d_y_row + k)));
  }
#elif TESSERA_CPU_LEVEL >= 2
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  for (; k + 8 <= f; k += 8) {
    const __m256i byte = _mm256_set1_epi32(b_row[k / 8]);
    const __m256i on = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane_bit), lane_bit);
    _mm256_storeu_ps(d_row + k,
                     _mm256_and_ps(_mm256_castsi256_ps(on), _mm256_loadu_ps(d_y_row + k)));
  }
#endif
  for (; k < f; ++k) d_row[k] = (b_row[k >> 3] >> (k & 7)) & 1u ? d_y_row[k] : 0.0f;
}

void positive_bits(std::uint8_t* bits, const float* y, std::int64_t r, std::int64_t f) {
  const std::int64_t row_bytes = (f + 7) / 8;
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork)
  for (std::int64_t row = 0; row < r; ++row)
    positive_bits_row(bits + row * row_bytes, y + row * f, f);
}

void relu_backward_bits(float* d_x, float* d_bias, const float* d_y, const std::uint8_t* bits,
                        std::int64_t r, std::int64_t f) {
  const std::int64_t row_bytes = (f + 7) / 8;
  const auto row = [&](std::int64_t i) {
    relu_backward_bits_row(d_x + i * f, d_y + i * f, bits + i * row_bytes, f);
  };
  if (!d_bias) {
#pragma omp parallel for schedule(static) if (r * f >= detail::kParallelMinWork)
    for (std::int64_t i = 0; i < r; ++i) row(i);
    return;
  }
  // Fused as bias_act_backward: each row's d_x is made and added to its block's column sums.
  std::vector<double> sums(static_cast<std::size_t>(f));
  detail::reduce_rows(sums.data(), f, r, [&](double* acc, std::int64_t i) {
    row(i);
    const float* d_row = d_x + i * f;
    for (std::int64_t k = 0; k < f; ++k) acc[k] += d_row[k];
  });
  for (std::int64_t k = 0; k < f; ++k) d_bias[k] += static_cast<float>(sums[k]);
}

void to_bf16(std::uint16_t* y, const float* x, std::int64_t n) {
  // Integer operations only, which the compiler vectorises at every level.
#pragma omp parallel for schedule(static) if (n >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < n; ++i) y[i] = ::tessera::detail::half_bits::f32_to_bf16(x[i]);
}

void from_bf16(float* y, const std::uint16_t* x, std::int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < n; ++i) y[i] = ::tessera::detail::half_bits::bf16_to_f32(x[i]);
}

}  // namespace tessera::cpu::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
