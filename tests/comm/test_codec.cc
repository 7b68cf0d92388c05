// SPDX-License-Identifier: Apache-2.0
// Tests of comm/codec.h: round trips at many widths for every codec, integer codecs against a
// naive loop over CounterRng::uniform (byte for byte), unbiasedness of stochastic rounding,
// determinism (key, thread count), the packed bit layout, constant/empty/non-finite rows,
// encoded sizes, and every failure class of the message header.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "comm/codec.h"
#include "core/cpu/dispatch.h"
#include "core/error.h"

namespace tessera {
namespace {

constexpr CodecKind kAllCodecs[] = {CodecKind::None, CodecKind::Bf16, CodecKind::Fp16,
                                    CodecKind::Int8, CodecKind::Int4, CodecKind::Int2};
constexpr CodecKind kIntCodecs[] = {CodecKind::Int8, CodecKind::Int4, CodecKind::Int2};

int levels(CodecKind kind) { return (1 << value_bits(kind)) - 1; }

// (rows, f) values: per row a random scale and shift, so offsets and ranges differ by row.
Tensor random_tensor(std::int64_t rows, std::int64_t f, std::uint32_t seed) {
  Tensor x(rows, f);
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-3.0f, 3.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float scale = std::exp(log_scale(gen));
    const float shift = normal(gen) * scale;
    for (std::int64_t k = 0; k < f; ++k) x.row<float>(r)[k] = shift + scale * normal(gen);
  }
  return x;
}

std::vector<NodeId> iota_rows(std::int64_t n) {
  std::vector<NodeId> rows(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<NodeId>(i);
  return rows;
}

// Global ids far from the local ones (and past 2^32) so the noise key is not the row index.
std::vector<GlobalId> global_ids(std::int64_t n, GlobalId base = (GlobalId{1} << 33) + 17) {
  std::vector<GlobalId> ids(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = base + 3 * static_cast<GlobalId>(i);
  return ids;
}

std::vector<std::byte> encode(CodecKind kind, const Tensor& x, const CodecNoise& noise,
                              std::span<const GlobalId> ids, std::span<float> ranges = {}) {
  std::vector<std::byte> bytes(static_cast<std::size_t>(x.rows()) *
                               encoded_row_bytes(kind, x.cols()));
  const std::vector<NodeId> rows = iota_rows(x.rows());
  encode_rows(kind, bytes, x, rows, ids, noise, ranges);
  return bytes;
}

Tensor decode(CodecKind kind, std::span<const std::byte> bytes, std::int64_t rows, std::int64_t f) {
  Tensor out(rows, f);
  decode_rows(kind, out, 0, rows, bytes);
  return out;
}

float row_scale(CodecKind kind, const float* row, std::int64_t f) {
  const auto [lo, hi] = std::minmax_element(row, row + f);
  return static_cast<float>((double{*hi} - double{*lo}) / levels(kind));
}

// The error bound of one decoded value x' of x (row `row` of width f).
float tolerance(CodecKind kind, float x, const float* row, std::int64_t f) {
  switch (kind) {
    case CodecKind::None: return 0.0f;  // a copy
    case CodecKind::Bf16:
      return std::ldexp(std::fabs(x), -8);  // RNE: half an ulp of 8 bits
    // RNE: half an ulp of 11 bits; below 2^-14 half the subnormal spacing 2^-24.
    case CodecKind::Fp16: return std::max(std::ldexp(std::fabs(x), -11), std::ldexp(1.0f, -25));
    default: {
      // Stochastic rounding moves a value by less than one level; offset + q * scale adds a
      // few float roundings of the row's magnitude.
      const auto [lo, hi] = std::minmax_element(row, row + f);
      const float magnitude = std::max(std::fabs(*lo), std::fabs(*hi));
      return row_scale(kind, row, f) * (1.0f + 1e-5f) + 4e-7f * magnitude;
    }
  }
}

void expect_round_trip(CodecKind kind, std::int64_t rows, std::int64_t f) {
  SCOPED_TRACE(std::string(to_string(kind)) + " rows " + std::to_string(rows) + " f " +
               std::to_string(f));
  const Tensor x = random_tensor(rows, f, static_cast<std::uint32_t>(rows * 1000 + f));
  const std::vector<GlobalId> ids = global_ids(rows);
  std::vector<float> ranges(static_cast<std::size_t>(rows), -1.0f);
  const CodecNoise noise{7, 3, 1, RngPurpose::CodecForward};
  const std::vector<std::byte> bytes = encode(kind, x, noise, ids, ranges);
  const Tensor y = decode(kind, bytes, rows, f);

  float worst_excess = 0.0f, worst_error = 0.0f;
  std::int64_t first_row = -1, first_col = -1;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x.row<float>(r);
    const float* yr = y.row<float>(r);
    for (std::int64_t k = 0; k < f; ++k) {
      const float error = std::fabs(yr[k] - xr[k]);
      const float excess = error - tolerance(kind, xr[k], xr, f);
      worst_error = std::max(worst_error, error);
      if (excess > 0.0f && first_row < 0) first_row = r, first_col = k;
      worst_excess = std::max(worst_excess, excess);
    }
    const auto [lo, hi] = std::minmax_element(xr, xr + f);
    EXPECT_EQ(ranges[static_cast<std::size_t>(r)], *hi - *lo) << "range of row " << r;
  }
  EXPECT_EQ(first_row, -1) << "largest error " << worst_error << " (exceeds its bound by "
                           << worst_excess << "); first mismatch at row " << first_row
                           << ", feature " << first_col;
  if (kind == CodecKind::None && rows > 0) {
    EXPECT_EQ(std::memcmp(x.f32(), y.f32(), x.bytes()), 0) << "none must be bit-exact";
  }
}

TEST(Codec, RoundTripAllCodecsAndWidths) {
  for (CodecKind kind : kAllCodecs) {
    for (std::int64_t f : {1, 3, 7, 8, 9, 31, 33, 257}) {
      for (std::int64_t rows : {0, 1, 5, 100}) expect_round_trip(kind, rows, f);
    }
  }
}

// The spec written as a plain loop: offset, scale, then floor(t + u) in double (exact for a
// float t and a 24-bit u), clamped, packed element 0 in the lowest bits.
std::vector<std::byte> naive_encode_int(CodecKind kind, const Tensor& x,
                                        std::span<const GlobalId> ids, const CodecNoise& noise) {
  const int bits = value_bits(kind), max_level = levels(kind);
  const std::int64_t f = x.cols();
  const CounterRng rng(noise.seed, noise.epoch, noise.layer, noise.purpose);
  std::vector<std::byte> bytes(static_cast<std::size_t>(x.rows()) * encoded_row_bytes(kind, f));
  for (std::int64_t r = 0; r < x.rows(); ++r) {
    std::byte* dst = bytes.data() + static_cast<std::size_t>(r) * encoded_row_bytes(kind, f);
    const float* xr = x.row<float>(r);
    const float offset = *std::min_element(xr, xr + f);
    const float scale = row_scale(kind, xr, f);
    std::memcpy(dst, &offset, 4);
    std::memcpy(dst + 4, &scale, 4);
    for (std::int64_t k = 0; k < f; ++k) {
      int q = 0;
      if (scale > 0.0f) {
        const float t = std::min((xr[k] - offset) * (1.0f / scale), static_cast<float>(max_level));
        const double u = rng.uniform(static_cast<std::uint64_t>(ids[static_cast<std::size_t>(r)]),
                                     static_cast<std::uint64_t>(k));
        q = std::min(static_cast<int>(std::floor(double{t} + u)), max_level);
      }
      const std::size_t bit = static_cast<std::size_t>(k) * static_cast<std::size_t>(bits);
      dst[8 + bit / 8] |= static_cast<std::byte>(q << (bit % 8));
    }
  }
  return bytes;
}

TEST(Codec, IntegerCodecsMatchNaiveLoop) {
  for (CodecKind kind : kIntCodecs) {
    for (std::int64_t f : {1, 3, 5, 63, 64, 65, 130, 257}) {
      SCOPED_TRACE(std::string(to_string(kind)) + " f " + std::to_string(f));
      const Tensor x = random_tensor(9, f, static_cast<std::uint32_t>(f));
      const std::vector<GlobalId> ids = global_ids(9, GlobalId{2147483640});  // around 2^31
      const CodecNoise noise{11, 2, 0, RngPurpose::CodecBackward};
      const std::vector<std::byte> bytes = encode(kind, x, noise, ids);
      const std::vector<std::byte> expected = naive_encode_int(kind, x, ids, noise);
      ASSERT_EQ(bytes.size(), expected.size());
      const auto mismatch = std::mismatch(bytes.begin(), bytes.end(), expected.begin());
      EXPECT_TRUE(mismatch.first == bytes.end())
          << "first differing byte " << (mismatch.first - bytes.begin()) << " of " << bytes.size();
    }
  }
}

// Decoding many independently rounded copies of one row averages to the row: the error of the
// mean of n decodes has standard deviation <= scale / (2 sqrt(n)) per element (a level choice
// is a Bernoulli variable times scale); we allow 5 of them. Rounding down without noise must
// fail the same bound, so the test can tell a biased codec from an unbiased one.
TEST(Codec, StochasticRoundingIsUnbiased) {
  constexpr std::int64_t kF = 96;
  constexpr int kDraws = 4000;
  const Tensor x = random_tensor(1, kF, 5);
  const float* xr = x.row<float>(0);
  const std::vector<GlobalId> ids = global_ids(1);
  for (CodecKind kind : kIntCodecs) {
    SCOPED_TRACE(std::string(to_string(kind)));
    const float scale = row_scale(kind, xr, kF);
    std::vector<double> sum(kF, 0.0);
    double largest_single_error = 0.0;
    for (int epoch = 0; epoch < kDraws; ++epoch) {
      const CodecNoise noise{1, static_cast<std::uint64_t>(epoch), 0, RngPurpose::CodecForward};
      const Tensor y = decode(kind, encode(kind, x, noise, ids), 1, kF);
      for (std::int64_t k = 0; k < kF; ++k) {
        sum[k] += y.row<float>(0)[k];
        largest_single_error =
            std::max(largest_single_error, std::fabs(double{y.row<float>(0)[k]} - xr[k]));
      }
    }
    const double bound = 5.0 * scale / (2.0 * std::sqrt(double{kDraws}));
    double worst = 0.0, worst_floor = 0.0;
    std::int64_t worst_k = 0;
    for (std::int64_t k = 0; k < kF; ++k) {
      const double error = std::fabs(sum[k] / kDraws - xr[k]);
      if (error > worst) worst = error, worst_k = k;
      const float offset = *std::min_element(xr, xr + kF);
      const double floored = offset + std::floor((xr[k] - offset) / scale) * scale;
      worst_floor = std::max(worst_floor, std::fabs(floored - xr[k]));
    }
    EXPECT_LE(worst, bound) << "largest mean error " << worst << " at feature " << worst_k
                            << " (scale " << scale << ")";
    EXPECT_GT(worst_floor, bound) << "rounding down must exceed the bound, else the test is blind";
    EXPECT_GT(largest_single_error, 0.1 * scale) << "single decodes must carry rounding error";
  }
}

TEST(Codec, SameKeySameBytesOtherKeyOtherBytes) {
  const Tensor x = random_tensor(1, 64, 9);
  const std::vector<GlobalId> ids = global_ids(1);
  const CodecNoise base{3, 4, 1, RngPurpose::CodecForward};
  for (CodecKind kind : kIntCodecs) {
    SCOPED_TRACE(std::string(to_string(kind)));
    const std::vector<std::byte> bytes = encode(kind, x, base, ids);
    EXPECT_EQ(encode(kind, x, base, ids), bytes);
    CodecNoise other = base;
    other.seed = 4;
    EXPECT_NE(encode(kind, x, other, ids), bytes) << "seed";
    other = base;
    other.epoch = 5;
    EXPECT_NE(encode(kind, x, other, ids), bytes) << "epoch";
    other = base;
    other.layer = 2;
    EXPECT_NE(encode(kind, x, other, ids), bytes) << "layer";
    other = base;
    other.purpose = RngPurpose::CodecBackward;
    EXPECT_NE(encode(kind, x, other, ids), bytes) << "purpose";
    const std::vector<GlobalId> low_word_only = {ids[0] & 0xFFFFFFFF};  // same low 32 bits
    EXPECT_NE(encode(kind, x, base, low_word_only), bytes) << "global id (high word)";
    const std::vector<GlobalId> next = {ids[0] + 1};
    EXPECT_NE(encode(kind, x, base, next), bytes) << "global id";
  }
}

TEST(Codec, BytesDoNotDependOnThreadCount) {
  const Tensor x = random_tensor(300, 257, 21);  // 300 * 257 >= 2^15: the parallel path
  const std::vector<GlobalId> ids = global_ids(300);
  const CodecNoise noise{5, 1, 2, RngPurpose::CodecForward};
  const int threads = omp_get_max_threads();
  for (CodecKind kind : kAllCodecs) {
    SCOPED_TRACE(std::string(to_string(kind)));
    omp_set_num_threads(1);
    const std::vector<std::byte> one = encode(kind, x, noise, ids);
    const Tensor y1 = decode(kind, one, 300, 257);
    omp_set_num_threads(2);
    const std::vector<std::byte> two = encode(kind, x, noise, ids);
    const Tensor y2 = decode(kind, two, 300, 257);
    EXPECT_EQ(one, two);
    EXPECT_EQ(std::memcmp(y1.f32(), y2.f32(), y1.bytes()), 0);
  }
  omp_set_num_threads(threads);
}

// Rows made of exact levels (min 0, max L: offset 0, scale 1) survive any noise: floor(q + u)
// = q for u in [0, 1).
TEST(Codec, ExactLevelsRoundTripExactly) {
  for (CodecKind kind : kIntCodecs) {
    for (std::int64_t f : {2, 3, 5, 7, 9, 31, 33, 65, 257}) {
      SCOPED_TRACE(std::string(to_string(kind)) + " f " + std::to_string(f));
      Tensor x(4, f);
      for (std::int64_t r = 0; r < 4; ++r) {
        for (std::int64_t k = 0; k < f; ++k) {
          x.row<float>(r)[k] = static_cast<float>((k * 7 + r * 3) % (levels(kind) + 1));
        }
        x.row<float>(r)[0] = 0.0f;
        x.row<float>(r)[f - 1] = static_cast<float>(levels(kind));
      }
      for (std::uint64_t epoch = 0; epoch < 20; ++epoch) {
        const std::vector<GlobalId> ids = global_ids(4);
        const Tensor y = decode(kind, encode(kind, x, {1, epoch, 0}, ids), 4, f);
        const auto mismatch = std::mismatch(x.f32(), x.f32() + x.numel(), y.f32());
        ASSERT_TRUE(mismatch.first == x.f32() + x.numel())
            << "epoch " << epoch << ": first mismatch at element " << (mismatch.first - x.f32())
            << ": " << *mismatch.first << " decoded as " << *mismatch.second;
      }
    }
  }
}

// floor(t + u) must be computed exactly: with u within 2^-18 of 1, the float sum 200 + u rounds
// to 201 and would move an exact level. Searches for a global id whose noise at feature 1 is
// that close to 1 (about 1 in 2^18).
TEST(Codec, ExactLevelSurvivesNoiseNearOne) {
  const CodecNoise noise{8, 1, 0, RngPurpose::CodecForward};
  const CounterRng rng(noise.seed, noise.epoch, noise.layer, noise.purpose);
  GlobalId id = 0;
  while (rng.uniform(static_cast<std::uint64_t>(id), 1) < 1.0f - std::ldexp(1.0f, -18)) ++id;
  Tensor x(1, 3);
  x.f32()[0] = 0.0f;
  x.f32()[1] = 200.0f;
  x.f32()[2] = 255.0f;
  const std::vector<GlobalId> ids = {id};
  const Tensor y = decode(CodecKind::Int8, encode(CodecKind::Int8, x, noise, ids), 1, 3);
  EXPECT_EQ(y.f32()[1], 200.0f) << "global id " << id << ", noise "
                                << rng.uniform(static_cast<std::uint64_t>(id), 1);
}

// Ranges of a few subnormals: 1/scale overflows (the division path) and for int8 range / 255
// underflows (scale becomes the smallest subnormal). Decoded values stay within one scale.
TEST(Codec, SubnormalRangesStayWithinOneLevel) {
  constexpr std::int64_t kF = 37;
  Tensor x(2, kF);
  for (std::int64_t k = 0; k < kF; ++k) {
    x.row<float>(0)[k] = static_cast<float>(k % 31) * std::numeric_limits<float>::denorm_min();
    x.row<float>(1)[k] =
        -static_cast<float>((k * 5) % 7) * std::numeric_limits<float>::denorm_min();
  }
  for (CodecKind kind : kIntCodecs) {
    SCOPED_TRACE(std::string(to_string(kind)));
    const std::vector<std::byte> bytes = encode(kind, x, {2, 0, 0}, global_ids(2));
    const Tensor y = decode(kind, bytes, 2, kF);
    for (std::int64_t r = 0; r < 2; ++r) {
      float scale;
      std::memcpy(&scale, bytes.data() + r * encoded_row_bytes(kind, kF) + 4, sizeof(float));
      EXPECT_GT(scale, 0.0f);
      float worst = 0.0f;
      std::int64_t worst_k = 0;
      for (std::int64_t k = 0; k < kF; ++k) {
        const float error = std::fabs(y.row<float>(r)[k] - x.row<float>(r)[k]);
        if (error > worst) worst = error, worst_k = k;
      }
      // Every value here is a multiple of 2^-149, so offset + q * scale is exact.
      EXPECT_LE(worst, scale) << "row " << r << ": largest error " << worst << " at feature "
                              << worst_k << ", scale " << scale;
    }
  }
}

std::vector<std::uint8_t> as_u8(std::span<const std::byte> bytes) {
  std::vector<std::uint8_t> out;
  for (std::byte b : bytes) out.push_back(std::to_integer<std::uint8_t>(b));
  return out;
}

// Offset 0.0f and scale 1.0f, then the packed levels, element 0 in the lowest bits.
TEST(Codec, PackedBitLayout) {
  const std::vector<std::uint8_t> header = {0, 0, 0, 0, 0x00, 0x00, 0x80, 0x3F};
  auto encoded = [&](CodecKind kind, std::vector<float> values) {
    Tensor x(1, static_cast<std::int64_t>(values.size()));
    std::copy(values.begin(), values.end(), x.f32());
    const std::vector<GlobalId> ids = {42};
    return as_u8(encode(kind, x, {}, ids));
  };
  auto with_header = [&](std::vector<std::uint8_t> packed) {
    std::vector<std::uint8_t> all = header;
    all.insert(all.end(), packed.begin(), packed.end());
    return all;
  };
  EXPECT_EQ(encoded(CodecKind::Int4, {0, 15, 3}), with_header({0xF0, 0x03}));
  EXPECT_EQ(encoded(CodecKind::Int4, {15, 0, 1, 2, 0}), with_header({0x0F, 0x21, 0x00}));
  EXPECT_EQ(encoded(CodecKind::Int2, {0, 1, 2, 3, 3}), with_header({0xE4, 0x03}));
  EXPECT_EQ(encoded(CodecKind::Int2, {3, 0, 0}), with_header({0x03}));
  EXPECT_EQ(encoded(CodecKind::Int8, {0, 255, 7}), with_header({0x00, 0xFF, 0x07}));
  // 16-bit codecs: little-endian values (1.0 = 0x3F80 in bf16, 0x3C00 in fp16; -2 = 0xC000).
  EXPECT_EQ(encoded(CodecKind::Bf16, {1.0f, -2.0f}),
            (std::vector<std::uint8_t>{0x80, 0x3F, 0x00, 0xC0}));
  EXPECT_EQ(encoded(CodecKind::Fp16, {1.0f, -2.0f}),
            (std::vector<std::uint8_t>{0x00, 0x3C, 0x00, 0xC0}));
}

// Round to nearest even and the special values, checked on exact bit patterns.
TEST(Codec, HalfPrecisionRounding) {
  auto bits16 = [](CodecKind kind, float v) {
    Tensor x(1, 1);
    x.f32()[0] = v;
    const std::vector<GlobalId> ids = {0};
    const std::vector<std::uint8_t> b = as_u8(encode(kind, x, {}, ids));
    return static_cast<std::uint16_t>(b[0] | b[1] << 8);
  };
  auto from_bits = [](std::uint32_t b) { return std::bit_cast<float>(b); };
  // bf16: ties go to the even neighbour, above a tie rounds up, largest finite rounds to Inf.
  EXPECT_EQ(bits16(CodecKind::Bf16, from_bits(0x3F808000)), 0x3F80);
  EXPECT_EQ(bits16(CodecKind::Bf16, from_bits(0x3F818000)), 0x3F82);
  EXPECT_EQ(bits16(CodecKind::Bf16, from_bits(0x3F808001)), 0x3F81);
  EXPECT_EQ(bits16(CodecKind::Bf16, from_bits(0x7F7FFFFF)), 0x7F80);
  // A NaN whose payload sits in the low 16 bits must stay a NaN, not become Inf.
  EXPECT_EQ(bits16(CodecKind::Bf16, from_bits(0x7F800001)) & 0x7FC0, 0x7FC0);
  // fp16: 1 + 2^-11 is a tie (to 1), 65504 is the largest finite, 65520 rounds to Inf,
  // 2^-24 is the smallest subnormal, 2^-25 ties to 0, 3 * 2^-25 rounds to 2 * 2^-24.
  EXPECT_EQ(bits16(CodecKind::Fp16, 1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(bits16(CodecKind::Fp16, 1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(bits16(CodecKind::Fp16, 65504.0f), 0x7BFF);
  EXPECT_EQ(bits16(CodecKind::Fp16, 65519.0f), 0x7BFF);
  EXPECT_EQ(bits16(CodecKind::Fp16, 65520.0f), 0x7C00);
  EXPECT_EQ(bits16(CodecKind::Fp16, -1e30f), 0xFC00);
  EXPECT_EQ(bits16(CodecKind::Fp16, std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(bits16(CodecKind::Fp16, std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(bits16(CodecKind::Fp16, 3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(bits16(CodecKind::Fp16, std::ldexp(1023.0f, -24)), 0x03FF);
  EXPECT_EQ(bits16(CodecKind::Fp16, std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(bits16(CodecKind::Fp16, -0.0f), 0x8000);
  EXPECT_EQ(bits16(CodecKind::Fp16, std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(bits16(CodecKind::Fp16, std::numeric_limits<float>::quiet_NaN()) & 0x7E00, 0x7E00);
}

TEST(Codec, ConstantAndEmptyRowsAreExact) {
  for (CodecKind kind : kAllCodecs) {
    SCOPED_TRACE(std::string(to_string(kind)));
    Tensor x(3, 33);
    for (std::int64_t k = 0; k < 33; ++k) {
      x.row<float>(0)[k] = 0.0f;
      x.row<float>(1)[k] = -2.5f;  // exactly representable in every codec
      x.row<float>(2)[k] = 1024.0f;
    }
    const std::vector<GlobalId> ids = global_ids(3);
    std::vector<float> ranges(3, -1.0f);
    const Tensor y = decode(kind, encode(kind, x, {}, ids, ranges), 3, 33);
    EXPECT_EQ(std::memcmp(x.f32(), y.f32(), x.bytes()), 0);
    EXPECT_EQ(ranges, std::vector<float>(3, 0.0f));

    Tensor empty(0, 33);
    EXPECT_TRUE(encode(kind, empty, {}, {}).empty());
    Tensor out(2, 33);
    EXPECT_NO_THROW(decode_rows(kind, out, 2, 0, {}));
    Tensor zero_width(2, 0);
    const std::vector<std::byte> bytes = encode(kind, zero_width, {}, global_ids(2));
    EXPECT_EQ(bytes.size(), 2 * encoded_row_bytes(kind, 0));
    EXPECT_NO_THROW(decode(kind, bytes, 2, 0));
  }
}

TEST(Codec, NonFiniteRowsAreRefusedByIntegerCodecs) {
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Tensor x = random_tensor(50, 40, 3);
    x.row<float>(37)[11] = bad;
    x.row<float>(41)[0] = bad;
    const std::vector<GlobalId> ids = global_ids(50, 1000);
    for (CodecKind kind : kIntCodecs) {
      try {
        encode(kind, x, {}, ids);
        ADD_FAILURE() << to_string(kind) << " accepted " << bad;
      } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
        // The first bad row (37, global id 1000 + 3 * 37 = 1111) and its feature.
        EXPECT_NE(e.message().find("global id 1111"), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("feature 11"), std::string::npos) << e.message();
      }
    }
    // The float codecs carry them.
    const Tensor y = decode(CodecKind::Bf16, encode(CodecKind::Bf16, x, {}, ids), 50, 40);
    EXPECT_EQ(std::isnan(y.row<float>(37)[11]), std::isnan(bad));
    EXPECT_EQ(std::isinf(y.row<float>(37)[11]), std::isinf(bad));
  }
}

TEST(Codec, NamesBitsAndSizes) {
  for (CodecKind kind : kAllCodecs) EXPECT_EQ(parse_codec(std::string(to_string(kind))), kind);
  EXPECT_THROW(parse_codec("int3"), Error);
  EXPECT_EQ(value_bits(CodecKind::None), 32);
  EXPECT_EQ(value_bits(CodecKind::Fp16), 16);
  EXPECT_EQ(value_bits(CodecKind::Int2), 2);
  EXPECT_FALSE(is_stochastic(CodecKind::Bf16));
  EXPECT_TRUE(is_stochastic(CodecKind::Int4));
  EXPECT_EQ(encoded_row_bytes(CodecKind::Int4, 256), 8u + 128u);
  EXPECT_EQ(encoded_row_bytes(CodecKind::Int4, 3), 8u + 2u);
  EXPECT_EQ(encoded_row_bytes(CodecKind::Int2, 3), 8u + 1u);
  EXPECT_EQ(encoded_row_bytes(CodecKind::Int2, 5), 8u + 2u);
  EXPECT_EQ(encoded_row_bytes(CodecKind::Int8, 7), 8u + 7u);
  EXPECT_EQ(encoded_row_bytes(CodecKind::Bf16, 5), 10u);
  EXPECT_EQ(encoded_row_bytes(CodecKind::Fp16, 5), 10u);
  EXPECT_EQ(encoded_row_bytes(CodecKind::None, 5), 20u);
  EXPECT_EQ(encoded_row_bytes(CodecKind::Int8, 0), 8u);
}

TEST(Codec, EncodeAndDecodeCheckSizes) {
  const Tensor x = random_tensor(4, 10, 1);
  const std::vector<NodeId> rows = {0, 3, 1};
  const std::vector<GlobalId> ids = global_ids(3);
  const std::size_t row_bytes = encoded_row_bytes(CodecKind::Int4, 10);
  std::vector<std::byte> out(3 * row_bytes);
  auto category = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.category();
    }
    return ErrorCategory::Internal;  // did not throw
  };
  const CodecKind k = CodecKind::Int4;
  EXPECT_NO_THROW(encode_rows(k, out, x, rows, ids, {}));
  std::vector<std::byte> short_out(out.size() - 1);
  EXPECT_EQ(category([&] { encode_rows(k, short_out, x, rows, ids, {}); }),
            ErrorCategory::InvalidArgument);
  EXPECT_EQ(category([&] { encode_rows(k, out, x, rows, std::span(ids).first(2), {}); }),
            ErrorCategory::InvalidArgument);
  const std::vector<NodeId> outside = {0, 4, 1};
  EXPECT_EQ(category([&] { encode_rows(k, out, x, outside, ids, {}); }),
            ErrorCategory::InvalidArgument);
  std::vector<float> ranges(2);
  EXPECT_EQ(category([&] { encode_rows(k, out, x, rows, ids, {}, ranges); }),
            ErrorCategory::InvalidArgument);

  Tensor y(5, 10);
  EXPECT_NO_THROW(decode_rows(k, y, 2, 3, out));
  EXPECT_EQ(category([&] { decode_rows(k, y, 3, 3, out); }), ErrorCategory::InvalidArgument);
  EXPECT_EQ(category([&] { decode_rows(k, y, -1, 3, out); }), ErrorCategory::InvalidArgument);
  try {
    decode_rows(k, y, 0, 3, std::span<const std::byte>(out).first(out.size() - 1));
    ADD_FAILURE() << "a truncated buffer was decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidInput);
    EXPECT_NE(e.message().find("expected " + std::to_string(3 * row_bytes) +
                               " bytes for 3 rows of width 10 (int4), got " +
                               std::to_string(3 * row_bytes - 1)),
              std::string::npos)
        << e.message();
  }
}

// A message of `rows` rows of width `cols` in codec `kind` (zero payload) with its header.
std::vector<std::byte> message(CodecKind kind, std::int64_t rows, std::int64_t cols) {
  std::vector<std::byte> bytes(kMessageHeaderBytes +
                               static_cast<std::size_t>(rows) * encoded_row_bytes(kind, cols));
  write_message_header(bytes, kind, rows, cols);
  return bytes;
}

// read_message_header's error for `bytes`, expecting InvalidInput with every fragment.
void expect_header_error(std::span<const std::byte> bytes, std::int64_t rows, std::int64_t cols,
                         CodecKind expected, std::vector<std::string> fragments) {
  const std::string where = "halo forward from rank 2, layer 1";
  try {
    read_message_header(bytes, rows, cols, expected, where);
    ADD_FAILURE() << "accepted; expected an error containing " << fragments[0];
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidInput) << e.message();
    fragments.push_back(where);
    for (const std::string& fragment : fragments) {
      EXPECT_NE(e.message().find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << e.message();
    }
  }
}

// Every instruction-set level the CPU runs (core/cpu/dispatch.h) encodes the same bytes and
// decodes the same floats as the baseline — except the documented one: the offset of an integer
// row whose minimum is a zero may be +0 at one level and -0 at another (AVX2 lanes keep their
// first zero), which decodes identically. Rows hold zeros of both signs, ReLU-like rows and, for
// the float codecs, NaN and Inf.
TEST(Codec, EveryCpuLevelEncodesTheBaselinesBytes) {
  const cpu::CpuLevel saved = cpu::cpu_level();
  std::vector<cpu::CpuLevel> levels;
  for (cpu::CpuLevel level : cpu::built_cpu_levels())
    if (level != cpu::CpuLevel::Baseline && cpu::cpu_supports(level)) levels.push_back(level);
  if (levels.empty()) GTEST_SKIP() << "no level beside the baseline built and runnable here";
  for (const std::int64_t f : {1, 7, 8, 9, 31, 64, 65, 130, 257}) {
    Tensor x = random_tensor(40, f, 11);
    for (std::int64_t r = 0; r < 40; r += 3)  // ReLU-like rows: minimum a zero of either sign
      for (std::int64_t k = 0; k < f; ++k) {
        float& v = x.row<float>(r)[k];
        v = v < 0.0f ? (k % 2 ? -0.0f : 0.0f) : v;
      }
    Tensor special(x.rows(), x.cols());
    special.copy_from(x);
    special.row<float>(1)[0] = std::numeric_limits<float>::quiet_NaN();
    special.row<float>(2)[f - 1] = std::numeric_limits<float>::infinity();
    const std::vector<GlobalId> ids = global_ids(40);
    const CodecNoise noise{5, 9, 1, RngPurpose::CodecForward};
    for (const CodecKind kind : kAllCodecs) {
      const Tensor& in = is_stochastic(kind) ? x : special;
      cpu::set_cpu_level(cpu::CpuLevel::Baseline);
      std::vector<float> want_ranges(40);
      const std::vector<std::byte> want = encode(kind, in, noise, ids, want_ranges);
      const Tensor want_decoded = decode(kind, want, 40, f);
      for (const cpu::CpuLevel level : levels) {
        cpu::set_cpu_level(level);
        const std::string where = std::string(to_string(kind)) + " at width " + std::to_string(f) +
                                  ", " + cpu::to_string(level);
        std::vector<float> ranges(40);
        std::vector<std::byte> got = encode(kind, in, noise, ids, ranges);
        ASSERT_EQ(got.size(), want.size()) << where;
        const std::size_t row_bytes = encoded_row_bytes(kind, f);
        for (std::size_t r = 0; r < 40 && is_stochastic(kind); ++r) {
          float a, b;  // the offsets: equal as numbers, then made equal as bytes
          std::memcpy(&a, want.data() + r * row_bytes, sizeof(float));
          std::memcpy(&b, got.data() + r * row_bytes, sizeof(float));
          EXPECT_EQ(a, b) << where << ", row " << r;
          if (a == b) std::memcpy(got.data() + r * row_bytes, &a, sizeof(float));
        }
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << where;
        EXPECT_EQ(std::memcmp(ranges.data(), want_ranges.data(), 40 * sizeof(float)), 0) << where;
        const Tensor decoded = decode(kind, want, 40, f);
        EXPECT_EQ(std::memcmp(decoded.raw(), want_decoded.raw(), decoded.bytes()), 0) << where;
      }
    }
  }
  cpu::set_cpu_level(saved);
}

TEST(Codec, MessageHeaderRoundTrip) {
  const std::vector<std::byte> bytes = message(CodecKind::Int4, 100, 256);
  EXPECT_EQ(as_u8(std::span(bytes).first(16)),
            (std::vector<std::uint8_t>{'T', 'S', 'R', 'M', 4, 0, 0, 0, 100, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(read_message_header(bytes, 100, 256, CodecKind::Int4, "x"), CodecKind::Int4);
  for (CodecKind kind : kIntCodecs) {
    EXPECT_EQ(read_message_header(message(kind, 3, 5), 3, 5, kind, "x"), kind);
  }
  EXPECT_EQ(read_message_header(message(CodecKind::None, 0, 7), 0, 7, CodecKind::None, "x"),
            CodecKind::None);
  std::vector<std::byte> out(16);
  EXPECT_THROW(write_message_header(out, CodecKind::Int8, std::int64_t{1} << 32, 1), Error);
  EXPECT_THROW(write_message_header(out, CodecKind::Int8, 1, std::int64_t{1} << 32), Error);
  EXPECT_THROW(write_message_header(std::span(out).first(15), CodecKind::Int8, 1, 1), Error);
}

TEST(Codec, MessageHeaderFailures) {
  const CodecKind i4 = CodecKind::Int4;
  const std::vector<std::byte> good = message(i4, 100, 256);  // 16 + 100 * 136 = 13616 bytes
  expect_header_error(std::span(good).first(15), 100, 256, i4,
                      {"expected at least 16 bytes", "found 15"});
  std::vector<std::byte> bad = good;
  bad[3] = std::byte{'X'};
  expect_header_error(bad, 100, 256, i4, {"magic", "54 53 52 4d", "54 53 52 58"});
  bad = good;
  bad[4] = std::byte{9};
  expect_header_error(bad, 100, 256, i4, {"unknown codec id 9"});
  expect_header_error(good, 100, 256, CodecKind::Int8,
                      {"int4 not allowed", "expected int8"});
  expect_header_error(message(CodecKind::Bf16, 100, 256), 100, 256, i4,
                      {"bf16 not allowed", "expected int4"});
  expect_header_error(good, 99, 256, i4, {"expected 99 rows, found 100"});
  expect_header_error(good, 100, 255, i4, {"expected width 255, found 256"});
  expect_header_error(std::span(good).first(good.size() - 1), 100, 256, i4,
                      {"13616 bytes", "found 13615"});
  std::vector<std::byte> longer = good;
  longer.push_back(std::byte{0});
  expect_header_error(longer, 100, 256, i4, {"13616 bytes", "found 13617"});
}

// A message in GPU memory is checked from a host copy of its header and its size.
TEST(Codec, MessageHeaderFromACopiedHeader) {
  const CodecKind i4 = CodecKind::Int4;
  const std::vector<std::byte> good = message(i4, 100, 256);  // 13616 bytes
  const std::span<const std::byte> header = std::span(good).first(kMessageHeaderBytes);
  EXPECT_EQ(read_message_header(header, good.size(), 100, 256, i4, "x"), i4);
  for (const std::size_t size : {good.size() - 1, good.size() + 1, std::size_t{15}}) {
    try {
      read_message_header(header, size, 100, 256, i4, "halo backward from rank 1, layer 0");
      ADD_FAILURE() << "size " << size << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidInput);
      EXPECT_NE(e.message().find("found " + std::to_string(size)), std::string::npos)
          << e.message();
      EXPECT_NE(e.message().find("halo backward from rank 1, layer 0"), std::string::npos);
    }
  }
  std::vector<std::byte> bad(good.begin(), good.begin() + kMessageHeaderBytes);
  bad[4] = std::byte{9};
  EXPECT_THROW(read_message_header(bad, good.size(), 100, 256, i4, "x"), Error);
}

}  // namespace
}  // namespace tessera
