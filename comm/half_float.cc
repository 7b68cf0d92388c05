// bf16 and IEEE binary16 conversions (see half_float.h). Rows go 8 values at a time through
// F16C when the build targets it (-march=native on x86), else through the portable functions,
// which match F16C bit for bit (checked on every input).
#include "comm/half_float.h"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace tessera::detail {
namespace {
constexpr int kChunk = 64;  // values per portable batch
}  // namespace

std::uint16_t f32_to_bf16(float v) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((b >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t{h} << 16); }

// IEEE binary16 with round to nearest even: overflow to Inf, subnormals, quiet NaN keeping the
// top payload bits (what F16C's vcvtps2ph does).
std::uint16_t f32_to_f16_portable(float v) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t sign = (b >> 16) & 0x8000u;
  const std::uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520: Inf
  if (a >= 0x38800000u) {  // normal half (>= 2^-14): rebias 127 -> 15, round at bit 13
    const std::uint32_t r = a + 0x0FFFu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((r - 0x38000000u) >> 13));
  }
  if (a <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25: rounds to zero
  // Subnormal half: units of 2^-24; a carry into 0x400 gives the smallest normal, as it should.
  const std::uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - (a >> 23);  // 14..24
  const std::uint32_t half = 1u << (shift - 1);
  const std::uint32_t rem = m & ((1u << shift) - 1u);
  std::uint32_t q = m >> shift;
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

float f16_to_f32_portable(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu;
  const std::uint32_t m = h & 0x3FFu;
  if (e == 0x1F) {  // Inf, or NaN made quiet as F16C does
    return std::bit_cast<float>(sign | 0x7F800000u | (m != 0 ? 0x400000u : 0u) | (m << 13));
  }
  if (e != 0) return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  const float mag = static_cast<float>(m) * 0x1p-24f;  // subnormal or zero, exact
  return sign ? -mag : mag;
}

// dst and src are byte pointers (a row may start at any address): loads and stores go through
// unaligned intrinsics or memcpy.
void encode_f16_row(std::byte* dst, const float* x, std::int64_t f) {
  std::int64_t k = 0;
#if defined(__F16C__)
  for (; k + 8 <= f; k += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * k), h);
  }
  if (k < f) {
    float tail[8] = {};
    std::memcpy(tail, x + k, static_cast<std::size_t>(f - k) * sizeof(float));
    alignas(16) std::uint16_t halves[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(halves),
                    _mm256_cvtps_ph(_mm256_loadu_ps(tail), _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(dst + 2 * k, halves, static_cast<std::size_t>(f - k) * sizeof(std::uint16_t));
  }
#else
  std::uint16_t halves[kChunk];
  for (; k < f; k += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, f - k));
    for (int j = 0; j < n; ++j) halves[j] = f32_to_f16_portable(x[k + j]);
    std::memcpy(dst + 2 * k, halves, static_cast<std::size_t>(n) * sizeof(std::uint16_t));
  }
#endif
}

void decode_f16_row(float* out, const std::byte* src, std::int64_t f) {
  std::int64_t k = 0;
#if defined(__F16C__)
  for (; k + 8 <= f; k += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * k));
    _mm256_storeu_ps(out + k, _mm256_cvtph_ps(h));
  }
  if (k < f) {
    alignas(16) std::uint16_t halves[8] = {};
    std::memcpy(halves, src + 2 * k, static_cast<std::size_t>(f - k) * sizeof(std::uint16_t));
    float floats[8];
    _mm256_storeu_ps(floats, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<__m128i*>(halves))));
    std::memcpy(out + k, floats, static_cast<std::size_t>(f - k) * sizeof(float));
  }
#else
  std::uint16_t halves[kChunk];
  for (; k < f; k += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, f - k));
    std::memcpy(halves, src + 2 * k, static_cast<std::size_t>(n) * sizeof(std::uint16_t));
    for (int j = 0; j < n; ++j) out[k + j] = f16_to_f32_portable(halves[j]);
  }
#endif
}

}  // namespace tessera::detail
