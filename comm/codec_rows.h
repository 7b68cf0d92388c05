// SPDX-License-Identifier: Apache-2.0
// The row functions of the codecs in comm/codec_table.cc, one family per file: the float
// codecs (none, bf16, fp16) in comm/float_codecs.cc and the stochastic integer codecs (8, 4 and
// 2 bits) in comm/int_codecs.cc. Each encodes one row of f floats into the codec's bytes
// (CodecSpec::encode_row) and decodes it back (CodecSpec::decode_row); the row loops, argument
// checks and GPU dispatch around them live in comm/codec.cc. Built once per instruction-set
// level (AVX2 intrinsics and F16C at level 2 and up); every level gives the same bytes, except
// that the sign of a zero row minimum (the offset of an integer row) may differ between the
// baseline and the AVX2 lanes — decoded values are identical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "comm/codec.h"
#include "core/cpu/cpu_level.h"
#include "core/rng.h"

namespace tessera::detail {

// Offset and scale (two f32) in front of every integer-codec row.
inline constexpr std::size_t kScaleBytes = 8;

struct RowStats {
  float lo;
  float hi;
  bool finite;  // no NaN or Inf in the row
};
}  // namespace tessera::detail

// The row functions, compiled once per instruction-set level like the CPU kernels
// (core/cpu/cpu_level.h): each level's in tessera::detail::<level>, inside its target region.
TESSERA_CPU_TARGET_BEGIN
namespace tessera::detail::TESSERA_CPU_NS {

// Min, max and finiteness of a row (NaN and Inf make it not finite; min and max then ignore
// NaNs). Min and max do not depend on the order, so the SIMD path gives the same answer.
RowStats row_stats(const float* x, std::int64_t f);
// max - min of a row for the float codecs: NaN when the row holds a NaN.
float row_range(const float* x, std::int64_t f);

// Float codecs: f32 as it is, bf16 and IEEE binary16 (round to nearest even). Never refuse a
// row; the noise arguments are unused.
bool raw_encode(std::byte* dst, const float* x, std::int64_t f, const CounterRng& rng,
                std::uint64_t item, float* range);
void raw_decode(float* out, const std::byte* src, std::int64_t f);
bool bf16_encode(std::byte* dst, const float* x, std::int64_t f, const CounterRng& rng,
                 std::uint64_t item, float* range);
void bf16_decode(float* out, const std::byte* src, std::int64_t f);
bool fp16_encode(std::byte* dst, const float* x, std::int64_t f, const CounterRng& rng,
                 std::uint64_t item, float* range);
void fp16_decode(float* out, const std::byte* src, std::int64_t f);

// Integer codecs of Bits = 8, 4 or 2 bits: [offset][scale][levels], levels = floor((x - offset)
// / scale + u) clamped to [0, 2^Bits - 1], u = rng.uniform(item, feature); refuse a row with a
// NaN or Inf. Instantiated for 8, 4 and 2 in comm/int_codecs.cc.
template <int Bits>
bool int_encode(std::byte* dst, const float* x, std::int64_t f, const CounterRng& rng,
                std::uint64_t item, float* range);
template <int Bits>
void int_decode(float* out, const std::byte* src, std::int64_t f);

}  // namespace tessera::detail::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END

namespace tessera::detail::TESSERA_CPU_NS {
// The codec table with this level's row functions (codec_table.cc); codec_table() gives the
// level in use.
std::span<const CodecSpec> level_codec_table();
}  // namespace tessera::detail::TESSERA_CPU_NS
