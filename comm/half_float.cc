// SPDX-License-Identifier: Apache-2.0
// bf16 and IEEE binary16 conversions (see half_float.h). Rows go 8 values at a time through
// F16C when the build targets it (-march=native on x86), else through the portable functions,
// which match F16C bit for bit (checked on every input).
#include "comm/half_float.h"

#include <algorithm>
#include <cstring>

#include "core/half_float_bits.h"

#if TESSERA_CPU_LEVEL >= 2
#include <immintrin.h>
#endif

TESSERA_CPU_TARGET_BEGIN
namespace tessera::detail::TESSERA_CPU_NS {
namespace {
constexpr int kChunk = 64;  // values per portable batch
}  // namespace

std::uint16_t f32_to_f16_portable(float v) { return half_bits::f32_to_f16(v); }
float f16_to_f32_portable(std::uint16_t h) { return half_bits::f16_to_f32(h); }

// dst and src are byte pointers (a row may start at any address): loads and stores go through
// unaligned intrinsics or memcpy. bf16 is integer arithmetic that the compiler vectorises once
// the conversion is inlined into the batch loop (it was a call per value from codec.cc).
void encode_bf16_row(std::byte* dst, const float* x, std::int64_t f) {
  alignas(64) std::uint16_t halves[kChunk];
  for (std::int64_t k = 0; k < f; k += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, f - k));
    for (int j = 0; j < n; ++j) halves[j] = half_bits::f32_to_bf16(x[k + j]);
    std::memcpy(dst + 2 * k, halves, static_cast<std::size_t>(n) * sizeof(std::uint16_t));
  }
}

void decode_bf16_row(float* out, const std::byte* src, std::int64_t f) {
  alignas(64) std::uint16_t halves[kChunk];
  for (std::int64_t k = 0; k < f; k += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, f - k));
    std::memcpy(halves, src + 2 * k, static_cast<std::size_t>(n) * sizeof(std::uint16_t));
    for (int j = 0; j < n; ++j) out[k + j] = half_bits::bf16_to_f32(halves[j]);
  }
}

void encode_f16_row(std::byte* dst, const float* x, std::int64_t f) {
  std::int64_t k = 0;
#if TESSERA_CPU_LEVEL >= 2
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
#if TESSERA_CPU_LEVEL >= 2
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

}  // namespace tessera::detail::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
