// SPDX-License-Identifier: Apache-2.0
// The stochastic integer codecs (8, 4 and 2 bits a value) of comm/codec_table.cc: a row is
// its offset (min) and scale ((max - min) / (2^bits - 1)) and one level per value, rounded up
// with probability equal to the fraction (stochastic rounding), so a decoded value equals the
// original in expectation. The kernels work on chunks of 64 features: one batched Philox call
// gives the noise of a chunk (bit-identical to CounterRng::uniform(global id, feature)), so the
// loops vectorise (AVX2 where the build targets it) and the bytes do not depend on the thread
// count. Relies on core/rng.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "comm/codec_rows.h"

#if TESSERA_CPU_LEVEL >= 2
#include <immintrin.h>
#endif

TESSERA_CPU_TARGET_BEGIN
namespace tessera::detail::TESSERA_CPU_NS {
namespace {

constexpr int kChunk = 64;  // features per noise batch (16 Philox blocks)

// Packs kChunk levels (< 2^Bits, one per byte) into kChunk * Bits / 8 bytes, element 0 in the
// lowest bits. Works on the little-endian word of the levels that make one output byte, so the
// loop vectorises: for 4 bits w = q0 | q1 << 8 gives (w | w >> 4) & 0xFF = q0 | q1 << 4; for 2
// bits two such steps.
template <int Bits>
void pack_chunk(std::uint8_t* dst, const std::uint8_t* q) {
  static_assert(Bits == 4 || Bits == 2);
  if constexpr (Bits == 4) {
    for (int j = 0; j < kChunk / 2; ++j) {
      std::uint16_t w;
      std::memcpy(&w, q + 2 * j, sizeof(w));
      dst[j] = static_cast<std::uint8_t>(w | w >> 4);
    }
  } else {
    for (int j = 0; j < kChunk / 4; ++j) {
      std::uint32_t w;
      std::memcpy(&w, q + 4 * j, sizeof(w));
      w = (w | w >> 6) & 0x000F000Fu;  // q0 | q1 << 2 in bits 0-3, q2 | q3 << 2 in bits 16-19
      dst[j] = static_cast<std::uint8_t>(w | w >> 12);
    }
  }
}

// The inverse of pack_chunk: one level per byte.
template <int Bits>
void unpack_chunk(std::uint8_t* q, const std::uint8_t* src) {
  static_assert(Bits == 4 || Bits == 2);
  if constexpr (Bits == 4) {
    for (int j = 0; j < kChunk / 2; ++j) {
      const std::uint16_t w = static_cast<std::uint16_t>((src[j] | src[j] << 4) & 0x0F0F);
      std::memcpy(q + 2 * j, &w, sizeof(w));
    }
  } else {
    for (int j = 0; j < kChunk / 4; ++j) {
      std::uint32_t w = src[j];
      w = (w | w << 12) & 0x000F000Fu;  // low nibble in bits 0-3, high nibble in bits 16-19
      w = (w | w << 6) & 0x03030303u;
      std::memcpy(q + 4 * j, &w, sizeof(w));
    }
  }
}

constexpr std::size_t packed_bytes(int bits, std::int64_t n) {
  return static_cast<std::size_t>((n * bits + 7) / 8);
}

// floor(t + u) clamped to [0, L] for t >= 0 and u = (word >> 8) * 2^-24, computed exactly: a
// float t + u would round up when u is within an ulp of 1 and move even an exact level.
template <int Bits>
inline std::uint8_t stochastic_level(float t, std::uint32_t word) {
  constexpr std::int32_t kLevels = (1 << Bits) - 1;
  constexpr float kMaxLevel = static_cast<float>(kLevels);
  t = t < kMaxLevel ? t : kMaxLevel;  // also catches x - offset overflowing to Inf
  const std::int32_t whole = static_cast<std::int32_t>(t);                    // floor, as t >= 0
  const float frac = t - static_cast<float>(whole);                           // exact
  const std::int32_t frac24 = static_cast<std::int32_t>(frac * 16777216.0f);  // floor(frac 2^24)
  const std::int32_t up = (static_cast<std::int32_t>(word >> 8) + frac24) >> 24;  // 0 or 1
  const std::int32_t level = whole + up;
  return static_cast<std::uint8_t>(level < kLevels ? level : kLevels);
}

// Levels of the n <= kChunk features of a chunk starting at feature `first`, the portable way:
// one CounterRng::words call per 4 features.
template <int Bits>
void quantize_chunk_portable(std::uint8_t* q, const float* x, int n, float offset, float scale,
                             float inv_scale, const CounterRng& rng, std::uint64_t item,
                             std::int64_t first) {
  const bool divide = !std::isfinite(inv_scale);  // subnormal scale: 1/scale overflows
  for (int k = 0; k < n; k += 4) {
    const auto words = rng.words(item, static_cast<std::uint32_t>((first + k) / 4));
    for (int w = 0; w < 4 && k + w < n; ++w) {
      const float t = divide ? (x[k + w] - offset) / scale : (x[k + w] - offset) * inv_scale;
      q[k + w] = stochastic_level<Bits>(t, words[static_cast<std::size_t>(w)]);
    }
  }
}

#if TESSERA_CPU_LEVEL >= 2
// noise[j] = the Philox words of features 8j .. 8j + 7 of the kChunk features of blocks
// first_block .. first_block + 15: the rounds of CounterRng::words (core/rng.h) on 2 x 8
// blocks at once (lane = block; two independent chains hide the multiply latency; GCC does not
// vectorise the 32 x 32 -> 64-bit products itself), then 4 x 4 transposes into feature order.
inline void philox16(__m256i noise[8], std::uint64_t key, std::uint64_t item,
                     std::uint32_t first_block) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i c0[2], c1[2], c2[2], c3[2];
  for (int h = 0; h < 2; ++h) {
    c0[h] = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first_block + 8u * h)), lane);
    c1[h] = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(item)));
    c2[h] = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(item >> 32)));
    c3[h] = _mm256_set1_epi32(static_cast<int>(0x7E55E7A1u));
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i key0 = _mm256_set1_epi32(static_cast<int>(k0));
    const __m256i key1 = _mm256_set1_epi32(static_cast<int>(k1));
    for (int h = 0; h < 2; ++h) {
      // 64-bit products of the even lanes and of the odd lanes, split into high and low words.
      const __m256i p0_even = _mm256_mul_epu32(c0[h], m0);
      const __m256i p0_odd = _mm256_mul_epu32(_mm256_srli_epi64(c0[h], 32), m0);
      const __m256i p1_even = _mm256_mul_epu32(c2[h], m1);
      const __m256i p1_odd = _mm256_mul_epu32(_mm256_srli_epi64(c2[h], 32), m1);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(p0_even, 32), p0_odd, 0xAA);
      const __m256i lo0 = _mm256_blend_epi32(p0_even, _mm256_slli_epi64(p0_odd, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(p1_even, 32), p1_odd, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(p1_even, _mm256_slli_epi64(p1_odd, 32), 0xAA);
      c0[h] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[h]), key0);
      c2[h] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[h]), key1);
      c1[h] = lo1;
      c3[h] = lo0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int h = 0; h < 2; ++h) {
    const __m256i t0 = _mm256_unpacklo_epi32(c0[h], c1[h]),
                  t1 = _mm256_unpackhi_epi32(c0[h], c1[h]);
    const __m256i t2 = _mm256_unpacklo_epi32(c2[h], c3[h]),
                  t3 = _mm256_unpackhi_epi32(c2[h], c3[h]);
    const __m256i b04 = _mm256_unpacklo_epi64(t0, t2), b15 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i b26 = _mm256_unpacklo_epi64(t1, t3), b37 = _mm256_unpackhi_epi64(t1, t3);
    noise[4 * h + 0] = _mm256_permute2x128_si256(b04, b15, 0x20);
    noise[4 * h + 1] = _mm256_permute2x128_si256(b26, b37, 0x20);
    noise[4 * h + 2] = _mm256_permute2x128_si256(b04, b15, 0x31);
    noise[4 * h + 3] = _mm256_permute2x128_si256(b26, b37, 0x31);
  }
}

// stochastic_level of 8 features at once (levels as int32 lanes).
template <int Bits>
inline __m256i stochastic_levels8(__m256 x, __m256 offset, __m256 inv_scale, __m256i noise) {
  const __m256 t = _mm256_min_ps(_mm256_mul_ps(_mm256_sub_ps(x, offset), inv_scale),
                                 _mm256_set1_ps(static_cast<float>((1 << Bits) - 1)));
  const __m256i whole = _mm256_cvttps_epi32(t);
  const __m256 frac = _mm256_sub_ps(t, _mm256_cvtepi32_ps(whole));
  const __m256i frac24 = _mm256_cvttps_epi32(_mm256_mul_ps(frac, _mm256_set1_ps(16777216.0f)));
  const __m256i up = _mm256_srli_epi32(_mm256_add_epi32(_mm256_srli_epi32(noise, 8), frac24), 24);
  return _mm256_min_epi32(_mm256_add_epi32(whole, up), _mm256_set1_epi32((1 << Bits) - 1));
}

// quantize_chunk_portable with AVX2: one Philox call per chunk; a short tail is read with a
// masked load (never past the row) and its extra levels are overwritten by the caller.
template <int Bits>
void quantize_chunk_avx2(std::uint8_t* q, const float* x, int n, float offset, float inv_scale,
                         std::uint64_t key, std::uint64_t item, std::int64_t first) {
  const __m256 offset8 = _mm256_set1_ps(offset), inv_scale8 = _mm256_set1_ps(inv_scale);
  __m256i noise[8];
  philox16(noise, key, item, static_cast<std::uint32_t>(first / 4));
  __m256i levels[8];
  for (int j = 0; j < 8; ++j) {
    const int m = std::min(8, n - 8 * j);
    if (m <= 0) {
      levels[j] = _mm256_setzero_si256();
      continue;
    }
    const __m256 xs =
        m == 8 ? _mm256_loadu_ps(x + 8 * j)
               : _mm256_maskload_ps(x + 8 * j,
                                    _mm256_cmpgt_epi32(_mm256_set1_epi32(m),
                                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    levels[j] = stochastic_levels8<Bits>(xs, offset8, inv_scale8, noise[j]);
  }
  // int32 -> bytes (values <= 255, so the saturating packs are exact), then undo the packs'
  // 128-bit lane interleave.
  for (int h = 0; h < 2; ++h) {
    const __m256i* l = levels + 4 * h;
    const __m256i words16 =
        _mm256_packus_epi16(_mm256_packus_epi32(l[0], l[1]), _mm256_packus_epi32(l[2], l[3]));
    const __m256i bytes =
        _mm256_permutevar8x32_epi32(words16, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * h), bytes);
  }
}
#endif

// Quantises one finite row with stats s: [offset][scale][levels], levels = floor((x - offset) /
// scale + u) clamped to [0, L], u = CounterRng::uniform(item, feature).
template <int Bits>
void encode_int_row(std::byte* dst, const float* x, std::int64_t f, const RowStats& s,
                    const CounterRng& rng, std::uint64_t item) {
  constexpr int kLevels = (1 << Bits) - 1;
  // In double so that a range above FLT_MAX still gives a finite scale; a range so small that
  // range / L underflows gets the smallest subnormal, so that levels still cover it.
  float scale = static_cast<float>((double{s.hi} - double{s.lo}) / kLevels);
  if (s.hi > s.lo && scale == 0.0f) scale = std::numeric_limits<float>::denorm_min();
  const float offset = s.lo;
  std::memcpy(dst, &offset, sizeof(float));
  std::memcpy(dst + sizeof(float), &scale, sizeof(float));
  std::uint8_t* packed = reinterpret_cast<std::uint8_t*>(dst + kScaleBytes);
  if (scale == 0.0f) {  // constant row: every level 0, decoded exactly as offset
    std::memset(packed, 0, packed_bytes(Bits, f));
    return;
  }
  const float inv_scale = 1.0f / scale;
  alignas(64) std::uint8_t q[kChunk];
  for (std::int64_t c = 0; c < f; c += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, f - c));
#if TESSERA_CPU_LEVEL >= 2
    if (std::isfinite(inv_scale)) [[likely]] {
      quantize_chunk_avx2<Bits>(q, x + c, n, offset, inv_scale, rng.key(), item, c);
    } else {
      quantize_chunk_portable<Bits>(q, x + c, n, offset, scale, inv_scale, rng, item, c);
    }
#else
    quantize_chunk_portable<Bits>(q, x + c, n, offset, scale, inv_scale, rng, item, c);
#endif
    std::fill(q + n, q + kChunk, std::uint8_t{0});  // zero padding bits
    if constexpr (Bits == 8) {
      std::memcpy(packed + c, q, static_cast<std::size_t>(n));
    } else if (n == kChunk) {
      pack_chunk<Bits>(packed + packed_bytes(Bits, c), q);
    } else {
      std::uint8_t last[kChunk];
      pack_chunk<Bits>(last, q);
      std::memcpy(packed + packed_bytes(Bits, c), last, packed_bytes(Bits, n));
    }
  }
}

template <int Bits>
void decode_int_row(float* out, const std::byte* src, std::int64_t f) {
  float offset, scale;
  std::memcpy(&offset, src, sizeof(float));
  std::memcpy(&scale, src + sizeof(float), sizeof(float));
  const std::uint8_t* packed = reinterpret_cast<const std::uint8_t*>(src + kScaleBytes);
  alignas(64) std::uint8_t q[kChunk];
  for (std::int64_t c = 0; c < f; c += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, f - c));
    const std::uint8_t* levels = packed + c;
    if constexpr (Bits != 8) {
      if (n == kChunk) {
        unpack_chunk<Bits>(q, packed + packed_bytes(Bits, c));
      } else {
        std::uint8_t last[kChunk] = {};
        std::memcpy(last, packed + packed_bytes(Bits, c), packed_bytes(Bits, n));
        unpack_chunk<Bits>(q, last);
      }
      levels = q;
    }
    for (int k = 0; k < n; ++k) out[c + k] = offset + static_cast<float>(levels[k]) * scale;
  }
}

}  // namespace

RowStats row_stats(const float* x, std::int64_t f) {
  RowStats s{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), true};
  std::int64_t k = 0;
#if TESSERA_CPU_LEVEL >= 2
  if (f >= 8) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
    __m256 lo = _mm256_set1_ps(s.lo), hi = _mm256_set1_ps(s.hi);
    __m256 finite = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (; k + 8 <= f; k += 8) {
      const __m256 v = _mm256_loadu_ps(x + k);
      lo = _mm256_min_ps(v, lo);  // a NaN v keeps lo
      hi = _mm256_max_ps(v, hi);
      finite =
          _mm256_and_ps(finite, _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), largest, _CMP_LE_OQ));
    }
    alignas(32) float lanes_lo[8], lanes_hi[8];
    _mm256_store_ps(lanes_lo, lo);
    _mm256_store_ps(lanes_hi, hi);
    for (int l = 0; l < 8; ++l) {
      s.lo = std::min(s.lo, lanes_lo[l]);
      s.hi = std::max(s.hi, lanes_hi[l]);
    }
    s.finite = _mm256_movemask_ps(finite) == 0xFF;
  }
#endif
  for (; k < f; ++k) {
    const float v = x[k];
    s.lo = v < s.lo ? v : s.lo;
    s.hi = v > s.hi ? v : s.hi;
    s.finite = s.finite && std::fabs(v) <= std::numeric_limits<float>::max();
  }
  if (f == 0) s.lo = s.hi = 0.0f;
  return s;
}

template <int Bits>
bool int_encode(std::byte* dst, const float* x, std::int64_t f, const CounterRng& rng,
                std::uint64_t item, float* range) {
  const RowStats s = row_stats(x, f);
  if (!s.finite) return false;
  if (range != nullptr) *range = s.hi - s.lo;
  encode_int_row<Bits>(dst, x, f, s, rng, item);
  return true;
}

template <int Bits>
void int_decode(float* out, const std::byte* src, std::int64_t f) {
  decode_int_row<Bits>(out, src, f);
}

template bool int_encode<8>(std::byte*, const float*, std::int64_t, const CounterRng&,
                            std::uint64_t, float*);
template bool int_encode<4>(std::byte*, const float*, std::int64_t, const CounterRng&,
                            std::uint64_t, float*);
template bool int_encode<2>(std::byte*, const float*, std::int64_t, const CounterRng&,
                            std::uint64_t, float*);
template void int_decode<8>(float*, const std::byte*, std::int64_t);
template void int_decode<4>(float*, const std::byte*, std::int64_t);
template void int_decode<2>(float*, const std::byte*, std::int64_t);

}  // namespace tessera::detail::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
