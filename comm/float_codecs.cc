// SPDX-License-Identifier: Apache-2.0
// The float codecs of comm/codec_table.cc: none (the f32 values as they are), bf16 and IEEE
// binary16 (round to nearest even, comm/half_float.h). They take every row, NaN and Inf too.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "comm/codec_rows.h"
#include "comm/half_float.h"

TESSERA_CPU_TARGET_BEGIN
namespace tessera::detail::TESSERA_CPU_NS {

float row_range(const float* x, std::int64_t f) {
  const RowStats s = row_stats(x, f);
  if (!s.finite && std::any_of(x, x + f, [](float v) { return std::isnan(v); })) {
    return std::numeric_limits<float>::quiet_NaN();
  }
  return s.hi - s.lo;
}

bool raw_encode(std::byte* dst, const float* x, std::int64_t f, const CounterRng&, std::uint64_t,
                float* range) {
  std::memcpy(dst, x, static_cast<std::size_t>(f) * sizeof(float));
  if (range != nullptr) *range = row_range(x, f);
  return true;
}

void raw_decode(float* out, const std::byte* src, std::int64_t f) {
  std::memcpy(out, src, static_cast<std::size_t>(f) * sizeof(float));
}

namespace {

// A float codec's encode_row around its row conversion.
template <void (*Convert)(std::byte*, const float*, std::int64_t)>
bool half_encode(std::byte* dst, const float* x, std::int64_t f, float* range) {
  Convert(dst, x, f);
  if (range != nullptr) *range = row_range(x, f);
  return true;
}

}  // namespace

bool bf16_encode(std::byte* dst, const float* x, std::int64_t f, const CounterRng&, std::uint64_t,
                 float* range) {
  return half_encode<encode_bf16_row>(dst, x, f, range);
}

void bf16_decode(float* out, const std::byte* src, std::int64_t f) { decode_bf16_row(out, src, f); }

bool fp16_encode(std::byte* dst, const float* x, std::int64_t f, const CounterRng&, std::uint64_t,
                 float* range) {
  return half_encode<encode_f16_row>(dst, x, f, range);
}

void fp16_decode(float* out, const std::byte* src, std::int64_t f) { decode_f16_row(out, src, f); }

}  // namespace tessera::detail::TESSERA_CPU_NS
TESSERA_CPU_TARGET_END
