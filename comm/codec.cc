// Message codecs (comm/codec.h): f32 copy, bf16/fp16 round to nearest even (F16C when the CPU
// has it, a portable conversion otherwise), and 8/4/2-bit stochastic rounding with a per-row
// offset and scale. The integer kernels are templated on the bit width and work on chunks of 64
// features: one batched Philox call gives the noise of a chunk (bit-identical to
// CounterRng::uniform(global id, feature)), so the loops vectorise and the bytes do not depend
// on the thread count. Relies on engine/core (Tensor, CounterRng, Error) and OpenMP; GPU tensors
// go to the CUDA twins in comm/codec_cuda.cu (builds with TESSERA_HAVE_CUDA_CODECS), which are
// told the two things this CPU build decides that the bytes depend on.
#include "comm/codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "comm/half_float.h"
#include "core/error.h"

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#ifdef TESSERA_HAVE_CUDA_CODECS
#include <vector>

#include "comm/codec_cuda.h"
#include "core/cuda/runtime.h"
#include "core/cuda/staging.h"
#endif

namespace tessera {
namespace {

using detail::decode_bf16_row;
using detail::decode_f16_row;
using detail::encode_bf16_row;
using detail::encode_f16_row;

// Rows are written with memcpy of host values; the wire format is little-endian.
static_assert(std::endian::native == std::endian::little,
              "codec wire format assumes little-endian");

constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 15;  // as core/cpu
constexpr std::size_t kScaleBytes = 8;  // offset f32 + scale f32 in front of an integer row
constexpr int kChunk = 64;              // features per noise batch (16 Philox blocks)
constexpr std::uint8_t kMagic[4] = {'T', 'S', 'R', 'M'};

// ---- small helpers ---------------------------------------------------------------------------

bool valid_kind(std::uint8_t id) { return id <= static_cast<std::uint8_t>(CodecKind::Int2); }

void put_u32(std::byte* dst, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<std::byte>(v >> (8 * i));
}
std::uint32_t get_u32(const std::byte* src) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::to_integer<std::uint32_t>(src[i]) << (8 * i);
  return v;
}

// "54 53 52 4d" for the bytes of a bad magic.
std::string hex_bytes(std::span<const std::byte> bytes) {
  constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (std::byte b : bytes) {
    if (!text.empty()) text += ' ';
    text += kDigits[std::to_integer<int>(b) >> 4];
    text += kDigits[std::to_integer<int>(b) & 15];
  }
  return text;
}

struct RowStats {
  float lo;
  float hi;
  bool finite;  // no NaN or Inf in the row
};

// Min, max and finiteness of a row (NaN and Inf make it not finite; min and max then ignore
// NaNs). Min and max do not depend on the order, so the SIMD path gives the same answer.
RowStats row_stats(const float* x, std::int64_t f) {
  RowStats s{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), true};
  std::int64_t k = 0;
#if defined(__AVX2__)
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

// max - min of a row for the float codecs: NaN when the row holds a NaN.
float row_range(const float* x, std::int64_t f) {
  const RowStats s = row_stats(x, f);
  if (!s.finite && std::any_of(x, x + f, [](float v) { return std::isnan(v); })) {
    return std::numeric_limits<float>::quiet_NaN();
  }
  return s.hi - s.lo;
}

// ---- integer codecs --------------------------------------------------------------------------

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

#if defined(__AVX2__)
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
#if defined(__AVX2__)
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

// ---- row loops -------------------------------------------------------------------------------

// Runs encode_row(i) for every row, in parallel for large blocks; encode_row returns false for
// a row it refused (non-finite values). Returns the first refused row, or r when none was.
template <class EncodeRow>
std::int64_t for_each_row(std::int64_t r, std::int64_t f, EncodeRow encode_row) {
  std::int64_t first_refused = r;
#pragma omp parallel for schedule(static) if (r * f >= kParallelMinWork)
  for (std::int64_t i = 0; i < r; ++i) {
    if (!encode_row(i)) {
#pragma omp critical(tessera_codec_refused)
      first_refused = std::min(first_refused, i);
    }
  }
  return first_refused;
}

[[noreturn]] void fail_non_finite(CodecKind kind, const float* x, std::int64_t f, std::int64_t i,
                                  NodeId src_row, GlobalId id) {
  std::int64_t k = 0;
  while (k < f && std::isfinite(x[k])) ++k;
  TESSERA_FAIL(InvalidArgument, "encode_rows (", to_string(kind), "): row ", i, " (global id ", id,
               ", local row ", src_row, ") has a non-finite value ", k < f ? x[k] : 0.0f,
               " at feature ", k, "; the integer codecs need finite rows");
}

// ---- GPU tensors -----------------------------------------------------------------------------

#ifdef TESSERA_HAVE_CUDA_CODECS
constexpr bool kGpuCodecs = true;

// row_stats takes min and max in 8 AVX2 lanes in this build (the lanes decide whether +0 or -0
// becomes the offset of a row whose minimum is zero); the GPU follows the same preference.
#if defined(__AVX2__)
constexpr bool kStatsInLanes8 = true;
#else
constexpr bool kStatsInLanes8 = false;
#endif

// Whether decode_int_row's offset + level * scale is rounded once in this build: compilers
// contract it into a fused multiply-add where the target has one (GCC from -O2, e.g. with
// -march=native on x86-64), and no macro tells. So the CPU decode itself is asked, once: level
// 255 with scale 1 + 2^-23 and offset -round(255 scale) gives 0 rounded twice and the product's
// rounding error, -2^-23, fused (feature 0 of a 65-wide row: in the vectorised loop, which the
// compiler contracts as it does the scalar tail).
bool cpu_decode_is_fused() {
  static const bool fused = [] {
    constexpr std::int64_t kWidth = 65;
    const float scale = 1.0f + 0x1p-23f;
    const float offset = -(255.0f + 0x1p-15f);  // -round(255 scale)
    std::vector<std::byte> row(encoded_row_bytes(CodecKind::Int8, kWidth), std::byte{255});
    std::memcpy(row.data(), &offset, sizeof(float));
    std::memcpy(row.data() + sizeof(float), &scale, sizeof(float));
    Tensor decoded(1, kWidth);
    decode_rows(CodecKind::Int8, decoded, 0, 1, row);
    return decoded.f32()[0] != 0.0f;
  }();
  return fused;
}

// encode_rows for a GPU tensor (arguments checked): out must be GPU memory; the ids, the rows
// and the ranges may be host or GPU memory. A refused row is reported as on the CPU.
void encode_rows_gpu(CodecKind kind, std::span<std::byte> out, const Tensor& x,
                     std::span<const NodeId> src_rows, std::span<const GlobalId> row_ids,
                     const CodecNoise& noise, std::span<float> ranges) {
  const auto r = static_cast<std::int64_t>(src_rows.size());
  const std::int64_t f = x.cols();
  TESSERA_CHECK(out.empty() || cuda::is_device_memory(out.data()), InvalidArgument,
                "encode_rows: x is on ", to_string(x.device()),
                ", so out must be GPU memory, found host memory");
  const cuda::DeviceInput<NodeId> rows(src_rows);
  const cuda::DeviceInput<GlobalId> ids(row_ids);
  cuda::DeviceOutput<float> range_out(ranges);
  const CounterRng rng(noise.seed, noise.epoch, noise.layer, noise.purpose);
  const std::int64_t refused = cuda::encode_rows(kind, out.data(), range_out.get(), x.f32(),
                                                 rows.get(), ids.get(), r, f, rng.key(),
                                                 kStatsInLanes8);
  range_out.finish();
  if (refused < r) {
    NodeId src_row = 0;
    GlobalId id = 0;
    cuda::download(&src_row, rows.get() + refused, sizeof(src_row));
    cuda::download(&id, ids.get() + refused, sizeof(id));
    std::vector<float> row(static_cast<std::size_t>(f));
    cuda::download(row.data(), x.f32() + std::int64_t{src_row} * f, row.size() * sizeof(float));
    fail_non_finite(kind, row.data(), f, refused, src_row, id);
  }
}

// Whether the host may read a span's memory (GPU-resident callers validated theirs).
bool host_readable(const void* ptr) { return !cuda::is_device_memory(ptr); }
#else
constexpr bool kGpuCodecs = false;
bool host_readable(const void*) { return true; }
#endif

}  // namespace

CodecKind parse_codec(const std::string& name) {
  for (std::uint8_t id = 0; valid_kind(id); ++id) {
    const auto kind = static_cast<CodecKind>(id);
    if (name == to_string(kind)) return kind;
  }
  TESSERA_FAIL(InvalidArgument, "unknown codec '", name,
               "': expected one of none, bf16, fp16, int8, int4, int2");
}

std::string_view to_string(CodecKind kind) {
  switch (kind) {
    case CodecKind::None: return "none";
    case CodecKind::Bf16: return "bf16";
    case CodecKind::Fp16: return "fp16";
    case CodecKind::Int8: return "int8";
    case CodecKind::Int4: return "int4";
    case CodecKind::Int2: return "int2";
  }
  return "unknown";
}

int value_bits(CodecKind kind) {
  switch (kind) {
    case CodecKind::None: return 32;
    case CodecKind::Bf16:
    case CodecKind::Fp16: return 16;
    case CodecKind::Int8: return 8;
    case CodecKind::Int4: return 4;
    case CodecKind::Int2: return 2;
  }
  TESSERA_FAIL(InvalidArgument, "value_bits: unknown codec id ", static_cast<int>(kind));
}

bool is_stochastic(CodecKind kind) {
  return kind == CodecKind::Int8 || kind == CodecKind::Int4 || kind == CodecKind::Int2;
}

std::size_t encoded_row_bytes(CodecKind kind, std::int64_t f) {
  TESSERA_CHECK(f >= 0, InvalidArgument, "encoded_row_bytes: width must be >= 0, got ", f);
  return packed_bytes(value_bits(kind), f) + (is_stochastic(kind) ? kScaleBytes : 0);
}

void encode_rows(CodecKind kind, std::span<std::byte> out, const Tensor& x,
                 std::span<const NodeId> src_rows, std::span<const GlobalId> row_ids,
                 const CodecNoise& noise, std::span<float> ranges) {
  const std::int64_t r = static_cast<std::int64_t>(src_rows.size());
  const std::int64_t f = x.cols();
  const std::size_t row_bytes = encoded_row_bytes(kind, f);
  const bool on_gpu = kGpuCodecs && x.device().kind == DeviceKind::Cuda;
  TESSERA_CHECK(x.dtype() == DType::F32 && (x.device() == Device::cpu() || on_gpu),
                InvalidArgument, "encode_rows: expected an f32 ", kGpuCodecs ? "CPU or GPU" : "CPU",
                " tensor, got ", to_string(x.dtype()), " on ", to_string(x.device()));
  TESSERA_CHECK(row_ids.size() == src_rows.size(), InvalidArgument,
                "encode_rows: ", src_rows.size(), " source rows but ", row_ids.size(),
                " global ids");
  TESSERA_CHECK(ranges.empty() || ranges.size() == src_rows.size(), InvalidArgument,
                "encode_rows: ranges must be empty or hold ", r, " values, got ", ranges.size());
  TESSERA_CHECK(out.size() == static_cast<std::size_t>(r) * row_bytes, InvalidArgument,
                "encode_rows: expected ", static_cast<std::size_t>(r) * row_bytes, " bytes for ", r,
                " rows of width ", f, " (", to_string(kind), "), got ", out.size());
  const bool check_rows = !on_gpu || host_readable(src_rows.data());
  for (std::int64_t i = 0; i < r && check_rows; ++i) {
    const NodeId s = src_rows[static_cast<std::size_t>(i)];
    TESSERA_CHECK(s >= 0 && s < x.rows(), InvalidArgument, "encode_rows: source row ", s,
                  " (entry ", i, ") outside [0, ", x.rows(), ")");
  }
  if (r == 0) return;
#ifdef TESSERA_HAVE_CUDA_CODECS
  if (on_gpu) return encode_rows_gpu(kind, out, x, src_rows, row_ids, noise, ranges);
#endif
  if (f == 0 && !is_stochastic(kind)) {  // nothing to write; an integer row still has its scale
    std::fill(ranges.begin(), ranges.end(), 0.0f);
    return;
  }

  const float* xd = x.f32();
  auto x_row = [&](std::int64_t i) {
    return xd + std::int64_t{src_rows[static_cast<std::size_t>(i)]} * f;
  };
  auto dst_row = [&](std::int64_t i) {
    return out.data() + static_cast<std::size_t>(i) * row_bytes;
  };
  const bool want_ranges = !ranges.empty();
  auto record_range = [&](std::int64_t i) {
    if (want_ranges) ranges[static_cast<std::size_t>(i)] = row_range(x_row(i), f);
  };
  const CounterRng rng(noise.seed, noise.epoch, noise.layer, noise.purpose);

  auto encode_int = [&]<int Bits>() {
    return for_each_row(r, f, [&](std::int64_t i) {
      const float* row = x_row(i);
      const RowStats s = row_stats(row, f);
      if (!s.finite) return false;
      if (want_ranges) ranges[static_cast<std::size_t>(i)] = s.hi - s.lo;
      const auto item = static_cast<std::uint64_t>(row_ids[static_cast<std::size_t>(i)]);
      encode_int_row<Bits>(dst_row(i), row, f, s, rng, item);
      return true;
    });
  };

  std::int64_t refused = r;
  switch (kind) {
    case CodecKind::None:
      for_each_row(r, f, [&](std::int64_t i) {
        std::memcpy(dst_row(i), x_row(i), row_bytes);
        record_range(i);
        return true;
      });
      break;
    case CodecKind::Bf16:
      for_each_row(r, f, [&](std::int64_t i) {
        encode_bf16_row(dst_row(i), x_row(i), f);
        record_range(i);
        return true;
      });
      break;
    case CodecKind::Fp16:
      for_each_row(r, f, [&](std::int64_t i) {
        encode_f16_row(dst_row(i), x_row(i), f);
        record_range(i);
        return true;
      });
      break;
    case CodecKind::Int8: refused = encode_int.template operator()<8>(); break;
    case CodecKind::Int4: refused = encode_int.template operator()<4>(); break;
    case CodecKind::Int2: refused = encode_int.template operator()<2>(); break;
  }
  if (refused < r) {
    fail_non_finite(kind, x_row(refused), f, refused, src_rows[static_cast<std::size_t>(refused)],
                    row_ids[static_cast<std::size_t>(refused)]);
  }
}

void decode_rows(CodecKind kind, Tensor& out, std::int64_t first_row, std::int64_t num_rows,
                 std::span<const std::byte> in) {
  const std::int64_t f = out.cols();
  const std::size_t row_bytes = encoded_row_bytes(kind, f);
  const bool on_gpu = kGpuCodecs && out.device().kind == DeviceKind::Cuda;
  TESSERA_CHECK(out.dtype() == DType::F32 && (out.device() == Device::cpu() || on_gpu),
                InvalidArgument, "decode_rows: expected an f32 ", kGpuCodecs ? "CPU or GPU" : "CPU",
                " tensor, got ", to_string(out.dtype()), " on ", to_string(out.device()));
  TESSERA_CHECK(first_row >= 0 && num_rows >= 0 && first_row + num_rows <= out.rows(),
                InvalidArgument, "decode_rows: rows [", first_row, ", ", first_row + num_rows,
                ") outside the output's ", out.rows(), " rows");
  const std::size_t expected = static_cast<std::size_t>(num_rows) * row_bytes;
  TESSERA_CHECK(in.size() == expected, InvalidInput, "decode_rows: expected ", expected,
                " bytes for ", num_rows, " rows of width ", f, " (", to_string(kind), "), got ",
                in.size());
  if (num_rows == 0 || f == 0) return;
#ifdef TESSERA_HAVE_CUDA_CODECS
  if (on_gpu) {
    TESSERA_CHECK(cuda::is_device_memory(in.data()), InvalidArgument, "decode_rows: out is on ",
                  to_string(out.device()), ", so `in` must be GPU memory, found host memory");
    return cuda::decode_rows(kind, out.f32() + first_row * f, in.data(), num_rows, f,
                             cpu_decode_is_fused());
  }
#endif

  float* od = out.f32();
  auto out_row = [&](std::int64_t i) { return od + (first_row + i) * f; };
  auto src_row = [&](std::int64_t i) {
    return in.data() + static_cast<std::size_t>(i) * row_bytes;
  };
  auto each_row = [&](auto decode_row) {
#pragma omp parallel for schedule(static) if (num_rows * f >= kParallelMinWork)
    for (std::int64_t i = 0; i < num_rows; ++i) decode_row(out_row(i), src_row(i));
  };
  switch (kind) {
    case CodecKind::None:
      each_row([&](float* o, const std::byte* s) { std::memcpy(o, s, row_bytes); });
      break;
    case CodecKind::Bf16:
      each_row([&](float* o, const std::byte* s) { decode_bf16_row(o, s, f); });
      break;
    case CodecKind::Fp16:
      each_row([&](float* o, const std::byte* s) { decode_f16_row(o, s, f); });
      break;
    case CodecKind::Int8:
      each_row([&](float* o, const std::byte* s) { decode_int_row<8>(o, s, f); });
      break;
    case CodecKind::Int4:
      each_row([&](float* o, const std::byte* s) { decode_int_row<4>(o, s, f); });
      break;
    case CodecKind::Int2:
      each_row([&](float* o, const std::byte* s) { decode_int_row<2>(o, s, f); });
      break;
  }
}

void write_message_header(std::span<std::byte> out, CodecKind kind, std::int64_t rows,
                          std::int64_t cols) {
  constexpr std::int64_t kMax = std::numeric_limits<std::uint32_t>::max();
  TESSERA_CHECK(out.size() >= kMessageHeaderBytes, InvalidArgument, "write_message_header: need ",
                kMessageHeaderBytes, " bytes, got ", out.size());
  TESSERA_CHECK(valid_kind(static_cast<std::uint8_t>(kind)), InvalidArgument,
                "write_message_header: unknown codec id ", static_cast<int>(kind));
  TESSERA_CHECK(rows >= 0 && rows <= kMax && cols >= 0 && cols <= kMax, InvalidArgument,
                "write_message_header: rows and width must lie in [0, 2^32 - 1], got ", rows,
                " rows of width ", cols);
  std::memcpy(out.data(), kMagic, 4);
  out[4] = static_cast<std::byte>(kind);
  out[5] = out[6] = out[7] = std::byte{0};
  put_u32(out.data() + 8, static_cast<std::uint32_t>(rows));
  put_u32(out.data() + 12, static_cast<std::uint32_t>(cols));
}

CodecKind read_message_header(std::span<const std::byte> in, std::int64_t rows, std::int64_t cols,
                              CodecKind expected, const std::string& where) {
  return read_message_header(in.first(std::min(in.size(), kMessageHeaderBytes)), in.size(), rows,
                             cols, expected, where);
}

CodecKind read_message_header(std::span<const std::byte> header, std::size_t message_bytes,
                              std::int64_t rows, std::int64_t cols, CodecKind expected,
                              const std::string& where) {
  const std::span<const std::byte> in = header;
  TESSERA_CHECK(message_bytes >= kMessageHeaderBytes && in.size() >= kMessageHeaderBytes,
                InvalidInput, where, ": message too short: expected at least ",
                kMessageHeaderBytes, " bytes (the header), found ", message_bytes);
  TESSERA_CHECK(std::memcmp(in.data(), kMagic, 4) == 0, InvalidInput, where,
                ": bad message magic: expected bytes 54 53 52 4d ('TSRM'), found ",
                hex_bytes(in.first(4)));
  const std::uint8_t id = std::to_integer<std::uint8_t>(in[4]);
  TESSERA_CHECK(valid_kind(id), InvalidInput, where, ": unknown codec id ", int{id},
                " (expected 0..", static_cast<int>(CodecKind::Int2), ")");
  const auto kind = static_cast<CodecKind>(id);
  TESSERA_CHECK(kind == expected, InvalidInput, where, ": codec ", to_string(kind),
                " not allowed: expected ", to_string(expected));
  const std::uint32_t found_rows = get_u32(in.data() + 8);
  const std::uint32_t found_cols = get_u32(in.data() + 12);
  TESSERA_CHECK(found_rows == rows, InvalidInput, where, ": expected ", rows, " rows, found ",
                found_rows);
  TESSERA_CHECK(found_cols == cols, InvalidInput, where, ": expected width ", cols, ", found ",
                found_cols);
  const std::size_t row_bytes = encoded_row_bytes(kind, found_cols);
  const std::size_t payload = message_bytes - kMessageHeaderBytes;
  const bool fits = row_bytes == 0 || found_rows <= payload / row_bytes;
  TESSERA_CHECK(fits && payload == std::size_t{found_rows} * row_bytes, InvalidInput, where,
                ": expected ", kMessageHeaderBytes, " + ", found_rows, " x ", row_bytes, " = ",
                kMessageHeaderBytes + std::size_t{found_rows} * row_bytes, " bytes (",
                to_string(kind), ", width ", found_cols, "), found ", message_bytes);
  return kind;
}

}  // namespace tessera
