// SPDX-License-Identifier: Apache-2.0
// The bit-level bf16 and IEEE binary16 conversions, defined once for the host (half_float.cc)
// and the GPU (codec_cuda.cu): integer operations and one exact product only, so that both
// compilers give the same bits. Round to nearest even; NaN stays a NaN keeping the top payload
// bits (quiet, as F16C does); fp16 overflows to Inf; subnormals are exact.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define TESSERA_HALF_BITS_FN __host__ __device__ inline
#else
#define TESSERA_HALF_BITS_FN inline
#endif

namespace tessera::detail::half_bits {

TESSERA_HALF_BITS_FN std::uint32_t bits_of(float v) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(v);
#else
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
#endif
}

TESSERA_HALF_BITS_FN float float_of(std::uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
#endif
}

TESSERA_HALF_BITS_FN std::uint16_t f32_to_bf16(float v) {
  const std::uint32_t b = bits_of(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((b >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

TESSERA_HALF_BITS_FN float bf16_to_f32(std::uint16_t h) {
  return float_of(std::uint32_t{h} << 16);
}

TESSERA_HALF_BITS_FN std::uint16_t f32_to_f16(float v) {
  const std::uint32_t b = bits_of(v);
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

TESSERA_HALF_BITS_FN float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu;
  const std::uint32_t m = h & 0x3FFu;
  if (e == 0x1F) return float_of(sign | 0x7F800000u | (m != 0 ? 0x400000u : 0u) | (m << 13));
  if (e != 0) return float_of(sign | ((e + 112u) << 23) | (m << 13));
  const float mag = static_cast<float>(m) * 0x1p-24f;  // subnormal or zero: exact everywhere
  return sign ? -mag : mag;
}

}  // namespace tessera::detail::half_bits
