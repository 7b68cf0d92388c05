// SPDX-License-Identifier: Apache-2.0
// Half-precision conversions for the bf16 and fp16 codecs: bf16 and IEEE binary16, both with
// round to nearest even (NaN kept a NaN, fp16 overflow to Inf, subnormals exact), one value at a
// time or a row at a time (F16C instructions when the build has them, a portable loop else).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::detail {

// The portable binary16 conversions (what F16C's vcvtps2ph / vcvtph2ps do).
std::uint16_t f32_to_f16_portable(float v);
float f16_to_f32_portable(std::uint16_t h);
// f values of x as bf16 / binary16 at dst (2 f bytes, any alignment), and back.
void encode_bf16_row(std::byte* dst, const float* x, std::int64_t f);
void decode_bf16_row(float* out, const std::byte* src, std::int64_t f);
void encode_f16_row(std::byte* dst, const float* x, std::int64_t f);
void decode_f16_row(float* out, const std::byte* src, std::int64_t f);

}  // namespace tessera::detail
