// SPDX-License-Identifier: Apache-2.0
// Half-precision conversions for the bf16 and fp16 codecs: bf16 and IEEE binary16, both with
// round to nearest even (NaN kept a NaN, fp16 overflow to Inf, subnormals exact), one value at a
// time or a row at a time (F16C instructions at instruction-set level 2 and up, a portable loop
// else).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cpu/cpu_level.h"

// Compiled once per instruction-set level (F16C from level 2), like the codec rows.
TESSERA_CPU_TARGET_BEGIN
namespace tessera::detail::TESSERA_CPU_NS {

// The portable binary16 conversions (what F16C's vcvtps2ph / vcvtph2ps do).
std::uint16_t f32_to_f16_portable(float v);
float f16_to_f32_portable(std::uint16_t h);
// f values of x as bf16 / binary16 at dst (2 f bytes, any alignment), and back.
void encode_bf16_row(std::byte* dst, const float* x, std::int64_t f);
void decode_bf16_row(float* out, const std::byte* src, std::int64_t f);
void encode_f16_row(std::byte* dst, const float* x, std::int64_t f);
void decode_f16_row(float* out, const std::byte* src, std::int64_t f);

}  // namespace tessera::detail::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
