// SPDX-License-Identifier: Apache-2.0
// The GPU message codecs (comm/codec_cuda.cu) against the CPU codecs, the specification, bit for
// bit: every codec at widths 1, 3, 7, 8, 33 and 256 and 0, 1 and 257 rows selected out of order
// and repeated, from random rows, constant rows, rows whose minimum is a zero of either sign,
// subnormal and overflowing ranges and (float codecs) NaN, Inf and half-precision edge values;
// ids, rows and ranges as host and as GPU spans; decoding into a row offset; arbitrary bytes;
// non-finite rows refused with the CPU's error. Every test skips, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "comm/codec.h"
#include "core/cuda/allocator.h"
#include "core/cuda/runtime.h"
#include "core/error.h"

namespace tessera {
namespace {

constexpr CodecKind kAllCodecs[] = {CodecKind::None, CodecKind::Bf16, CodecKind::Fp16,
                                    CodecKind::Int8, CodecKind::Int4, CodecKind::Int2};
const std::vector<std::int64_t> kWidths = {1, 3, 7, 8, 33, 256};
const std::vector<std::int64_t> kRowCounts = {0, 1, 257};
constexpr std::int64_t kSourceRows = 37;  // rows of x the selections draw from
const Device kGpu{DeviceKind::Cuda, 0};
const CodecNoise kNoise{1234, 5, 2, RngPurpose::CodecBackward};

class CudaCodec : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::cuda_available()) {
      std::printf("skipping GPU codec twin test: %s\n", cuda::unavailable_reason().c_str());
      GTEST_SKIP() << "no usable CUDA GPU: " << cuda::unavailable_reason();
    }
  }
};

template <class T>
cuda::DeviceBuffer upload(std::span<const T> host) {
  cuda::DeviceBuffer buffer(host.size_bytes());
  if (!host.empty()) cuda::upload(buffer.get(), host.data(), host.size_bytes());
  return buffer;
}
template <class T>
cuda::DeviceBuffer upload(const std::vector<T>& host) {
  return upload(std::span<const T>(host));
}
template <class T>
std::vector<T> download(const cuda::DeviceBuffer& buffer, std::size_t n) {
  std::vector<T> host(n);
  if (n) cuda::download(host.data(), buffer.get(), n * sizeof(T));
  return host;
}
std::vector<float> values_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  std::vector<float> values(static_cast<std::size_t>(host.numel()));
  if (!values.empty()) std::memcpy(values.data(), host.f32(), values.size() * sizeof(float));
  return values;
}

// Float values the float codecs round specially: NaNs (quiet, signalling, with payloads), Inf,
// the fp16 overflow threshold and subnormal boundaries, bf16 ties, signed zero, FLT_MAX.
const std::uint32_t kSpecialBits[] = {
    0x7FC00000u, 0x7F800001u, 0xFFC12345u, 0x7F800000u, 0xFF800000u, 0x477FE000u, 0x477FEFFFu,
    0x477FF000u, 0x387FC000u, 0x38800000u, 0x33800000u, 0x33000000u, 0x33400000u, 0x33000001u,
    0x3F808000u, 0x3F818000u, 0x80000000u, 0x00000001u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x3EAAAAABu};

// (n, f) rows; row j is of kind j % kinds: random (per-row scale and shift), constant (range 0),
// positive with zeros of either sign (the offset's sign follows the CPU's choice among equal
// minima), constant zeros of both signs, multiples of the smallest subnormal (a subnormal scale:
// the CPU divides), values near +-FLT_MAX (a range above FLT_MAX) and, with `specials`, the
// special values above (non-finite rows: float codecs only).
Tensor source_tensor(std::int64_t n, std::int64_t f, bool specials, std::uint32_t seed) {
  Tensor x(n, f);
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const std::int64_t kinds = specials ? 7 : 6;
  constexpr float kTiny = std::numeric_limits<float>::denorm_min();
  for (std::int64_t j = 0; j < n; ++j) {
    float* row = x.row<float>(j);
    const float scale = std::exp(6.0f * unit(gen) - 3.0f);
    const float shift = normal(gen) * scale;
    for (std::int64_t k = 0; k < f; ++k) {
      const std::uint32_t u = gen();
      const float sign = (u & 1) ? -1.0f : 1.0f;
      switch (j % kinds) {
        case 0: row[k] = shift + scale * normal(gen); break;
        case 1: row[k] = shift; break;
        case 2: row[k] = u % 3 == 0 ? sign * 0.0f : scale * unit(gen); break;
        case 3: row[k] = sign * 0.0f; break;
        case 4: row[k] = static_cast<float>(u % 41) * kTiny; break;
        case 5: row[k] = sign * (1e38f + 2.4e38f * unit(gen)); break;
        default:
          row[k] = std::bit_cast<float>(kSpecialBits[static_cast<std::size_t>(j + k) %
                                                     std::size(kSpecialBits)]);
      }
    }
  }
  return x;
}

// r entries out of order, each row listed several times for r > kSourceRows.
std::vector<NodeId> selected_rows(std::int64_t r) {
  std::vector<NodeId> rows(static_cast<std::size_t>(r));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<NodeId>((i * 11 + 5) % kSourceRows);
  }
  return rows;
}
// The global id of each selected row (past 2^32, so the noise item is not the row index).
std::vector<GlobalId> ids_of(const std::vector<NodeId>& rows) {
  std::vector<GlobalId> ids(rows.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = (GlobalId{1} << 33) + 17 + 7 * rows[i];
  return ids;
}

::testing::AssertionResult same_bytes(const std::vector<std::byte>& got,
                                      const std::vector<std::byte>& want, std::size_t row_bytes) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << ", want " << want.size();
  }
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && bad++ == 0) first = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " bytes differ; first: row " << first / row_bytes
         << " byte " << first % row_bytes << ": GPU " << std::to_integer<int>(got[first])
         << ", CPU " << std::to_integer<int>(want[first]);
}

// Bit for bit (NaN payloads and signed zeros included).
::testing::AssertionResult same_floats(const std::vector<float>& got,
                                       const std::vector<float>& want, std::int64_t cols) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << ", want " << want.size();
  }
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]) &&
        bad++ == 0) {
      first = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const auto c = static_cast<std::size_t>(std::max<std::int64_t>(cols, 1));
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " values differ; first (" << first / c << ", "
         << first % c << "): GPU " << got[first] << " (0x" << std::hex
         << std::bit_cast<std::uint32_t>(got[first]) << "), CPU " << want[first] << " (0x"
         << std::bit_cast<std::uint32_t>(want[first]) << ")";
}

// Where the GPU encode's index spans and ranges live.
enum class Spans { Host, Gpu, HostWithoutRanges };
const char* spans_name(Spans spans) {
  return spans == Spans::Host ? "host spans" : spans == Spans::Gpu ? "GPU spans" : "no ranges";
}

struct Encoded {
  std::vector<std::byte> bytes;
  std::vector<float> ranges;
};

constexpr std::byte kUnwritten{0xA5};  // what both sides' buffers hold before encoding
constexpr float kNoRange = -7.0f;

Encoded cpu_encode(CodecKind kind, const Tensor& x, const std::vector<NodeId>& rows) {
  const std::vector<GlobalId> ids = ids_of(rows);
  Encoded e{std::vector<std::byte>(rows.size() * encoded_row_bytes(kind, x.cols()), kUnwritten),
            std::vector<float>(rows.size(), kNoRange)};
  encode_rows(kind, e.bytes, x, rows, ids, kNoise, e.ranges);
  return e;
}

Encoded gpu_encode(CodecKind kind, const Tensor& x_gpu, const std::vector<NodeId>& rows,
                   Spans spans) {
  const std::vector<GlobalId> ids = ids_of(rows);
  const std::size_t n = rows.size() * encoded_row_bytes(kind, x_gpu.cols());
  const cuda::DeviceBuffer out = upload(std::vector<std::byte>(n, kUnwritten));
  Encoded e{{}, std::vector<float>(rows.size(), kNoRange)};
  const cuda::DeviceBuffer d_rows = upload(rows), d_ids = upload(ids), d_ranges = upload(e.ranges);
  const std::span<std::byte> out_span(out.as<std::byte>(), n);
  if (spans == Spans::Gpu) {
    encode_rows(kind, out_span, x_gpu, {d_rows.as<const NodeId>(), rows.size()},
                {d_ids.as<const GlobalId>(), ids.size()}, kNoise,
                {d_ranges.as<float>(), rows.size()});
    e.ranges = download<float>(d_ranges, rows.size());
  } else {
    encode_rows(kind, out_span, x_gpu, rows, ids, kNoise,
                spans == Spans::Host ? std::span<float>(e.ranges) : std::span<float>());
  }
  e.bytes = download<std::byte>(out, n);
  return e;
}

TEST_F(CudaCodec, EncodeMatchesCpuByteForByte) {
  for (CodecKind kind : kAllCodecs) {
    for (std::int64_t f : kWidths) {
      const Tensor x = source_tensor(kSourceRows, f, !is_stochastic(kind), 11 + f);
      const Tensor x_gpu = x.to(kGpu);
      for (std::int64_t r : kRowCounts) {
        const std::vector<NodeId> rows = selected_rows(r);
        const Encoded want = cpu_encode(kind, x, rows);
        for (Spans spans : {Spans::Host, Spans::Gpu, Spans::HostWithoutRanges}) {
          const Encoded got = gpu_encode(kind, x_gpu, rows, spans);
          const std::string where = std::string(to_string(kind)) + " F " + std::to_string(f) +
                                     " R " + std::to_string(r) + " " + spans_name(spans);
          EXPECT_TRUE(same_bytes(got.bytes, want.bytes, encoded_row_bytes(kind, f))) << where;
          if (spans != Spans::HostWithoutRanges) {
            EXPECT_TRUE(same_floats(got.ranges, want.ranges, 1)) << where << " (ranges)";
          } else {
            EXPECT_TRUE(same_floats(got.ranges, std::vector<float>(rows.size(), kNoRange), 1))
                << where << " (ranges not asked for)";
          }
        }
      }
    }
  }
}

// Decodes into rows [first_row, first_row + R) of a (R + 5, F) tensor holding other values: the
// decoded rows equal the CPU's and the others stay as they were.
TEST_F(CudaCodec, DecodeMatchesCpuBitForBitAndLeavesOtherRows) {
  for (CodecKind kind : kAllCodecs) {
    for (std::int64_t f : kWidths) {
      const Tensor x = source_tensor(kSourceRows, f, !is_stochastic(kind), 23 + f);
      for (std::int64_t r : kRowCounts) {
        const std::vector<NodeId> rows = selected_rows(r);
        const std::vector<std::byte> bytes = cpu_encode(kind, x, rows).bytes;
        const cuda::DeviceBuffer d_bytes = upload(bytes);
        const std::span<const std::byte> d_span(d_bytes.as<const std::byte>(), bytes.size());
        for (std::int64_t first_row : {std::int64_t{0}, std::int64_t{3}}) {
          Tensor want(r + 5, f);
          for (std::int64_t i = 0; i < want.numel(); ++i) {
            want.f32()[i] = 0.25f * static_cast<float>(i) - 3.0f;
          }
          Tensor got = want.to(kGpu);
          decode_rows(kind, want, first_row, r, bytes);
          decode_rows(kind, got, first_row, r, d_span);
          EXPECT_TRUE(same_floats(values_of(got), values_of(want), f))
              << to_string(kind) << " F " << f << " R " << r << " first row " << first_row;
        }
      }
    }
  }
}

// Bytes no encoder writes: every bit pattern of the float codecs' values (NaN payloads, Inf,
// subnormal halves), and for the integer codecs random levels under finite offsets and scales
// of every magnitude, sign and subnormal (which checks the fused or unfused offset + level *
// scale of this build's CPU on many more values).
TEST_F(CudaCodec, DecodeOfArbitraryBytesMatchesCpu) {
  std::mt19937 gen(77);
  std::uniform_real_distribution<float> exponent(-140.0f, 120.0f);
  for (CodecKind kind : kAllCodecs) {
    for (std::int64_t f : kWidths) {
      constexpr std::int64_t kRows = 257;
      const std::size_t row_bytes = encoded_row_bytes(kind, f);
      std::vector<std::byte> bytes(kRows * row_bytes);
      for (std::byte& b : bytes) b = static_cast<std::byte>(gen());
      for (std::int64_t i = 0; is_stochastic(kind) && i < kRows; ++i) {
        for (int v = 0; v < 2; ++v) {  // offset, scale
          const float magnitude = std::exp2(exponent(gen));
          const float value = (gen() & 1 ? -1.0f : 1.0f) * (gen() % 16 == 0 ? 0.0f : magnitude);
          std::memcpy(bytes.data() + i * row_bytes + 4 * v, &value, sizeof(float));
        }
      }
      Tensor want(kRows, f);
      decode_rows(kind, want, 0, kRows, bytes);
      Tensor got(kRows, f, DType::F32, kGpu);
      const cuda::DeviceBuffer d_bytes = upload(bytes);
      decode_rows(kind, got, 0, kRows, {d_bytes.as<const std::byte>(), bytes.size()});
      EXPECT_TRUE(same_floats(values_of(got), values_of(want), f)) << to_string(kind) << " F " << f;
    }
  }
}

// Which zero becomes the offset of a row whose minimum is zero: +0 and -0 placed where the CPU's
// choice in order (scalar) and in 8 lanes (AVX2) differ, at widths with and without a tail.
TEST_F(CudaCodec, ZeroMinimumGivesTheCpusOffsetSign) {
  for (CodecKind kind : {CodecKind::Int8, CodecKind::Int4, CodecKind::Int2}) {
    for (std::int64_t f : {std::int64_t{9}, std::int64_t{16}, std::int64_t{21}}) {
      Tensor x(4, f);
      for (std::int64_t j = 0; j < 4; ++j) {
        float* row = x.row<float>(j);
        for (std::int64_t k = 0; k < f; ++k) row[k] = 1.0f + 0.125f * static_cast<float>(k);
        const float first = j % 2 ? -0.0f : 0.0f;
        row[j < 2 ? 1 : 3] = first;       // early, in lane 1 or 3
        row[8] = -first;                  // later, in lane 0
        if (f > 16) row[f - 1] = -first;  // in the tail
      }
      const std::vector<NodeId> rows = {3, 0, 2, 1, 0};
      const Encoded want = cpu_encode(kind, x, rows);
      const Tensor x_gpu = x.to(kGpu);
      const Encoded got = gpu_encode(kind, x_gpu, rows, Spans::Gpu);
      EXPECT_TRUE(same_bytes(got.bytes, want.bytes, encoded_row_bytes(kind, f)))
          << to_string(kind) << " F " << f;
      EXPECT_TRUE(same_floats(got.ranges, want.ranges, 1)) << to_string(kind) << " F " << f;
    }
  }
}

// A NaN or Inf row: the same error as on the CPU (entry, global id, local row, value, feature);
// the other rows and their ranges are written on both sides alike.
TEST_F(CudaCodec, IntegerCodecsRefuseNonFiniteRowsAsTheCpuDoes) {
  for (CodecKind kind : {CodecKind::Int8, CodecKind::Int4, CodecKind::Int2}) {
    constexpr std::int64_t kF = 7;
    Tensor x = source_tensor(6, kF, false, 5);
    x.row<float>(4)[2] = std::numeric_limits<float>::quiet_NaN();
    x.row<float>(1)[5] = -std::numeric_limits<float>::infinity();
    const std::vector<NodeId> rows = {0, 2, 4, 3, 1, 5};  // entry 2 (row 4) is refused first
    std::string cpu_error, gpu_error;
    Encoded want, got;
    try {
      want = cpu_encode(kind, x, rows);
    } catch (const Error& e) {
      cpu_error = e.what();
    }
    const Tensor x_gpu = x.to(kGpu);
    for (Spans spans : {Spans::Host, Spans::Gpu}) {
      gpu_error.clear();
      try {
        got = gpu_encode(kind, x_gpu, rows, spans);
      } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
        gpu_error = e.what();
      }
      EXPECT_FALSE(cpu_error.empty());
      EXPECT_EQ(gpu_error, cpu_error) << to_string(kind) << " " << spans_name(spans);
    }
  }
}

// A refused row (here listed twice) stays unwritten, and every other row and its range is
// written, on both sides alike.
TEST_F(CudaCodec, RefusedRowsLeaveTheOtherRowsEncodedAsOnTheCpu) {
  constexpr std::int64_t kF = 33;
  Tensor x = source_tensor(8, kF, false, 9);
  x.row<float>(6)[30] = std::numeric_limits<float>::infinity();
  const std::vector<NodeId> rows = {7, 6, 0, 6, 5};
  const std::vector<GlobalId> ids = ids_of(rows);
  const Tensor x_gpu = x.to(kGpu);
  for (CodecKind kind : {CodecKind::Int8, CodecKind::Int4, CodecKind::Int2}) {
    const std::size_t n = rows.size() * encoded_row_bytes(kind, kF);
    std::vector<std::byte> want(n, kUnwritten);
    std::vector<float> want_ranges(rows.size(), kNoRange), got_ranges(rows.size(), kNoRange);
    EXPECT_THROW(encode_rows(kind, want, x, rows, ids, kNoise, want_ranges), Error);
    const cuda::DeviceBuffer out = upload(std::vector<std::byte>(n, kUnwritten));
    EXPECT_THROW(encode_rows(kind, {out.as<std::byte>(), n}, x_gpu, rows, ids, kNoise, got_ranges),
                 Error);
    EXPECT_TRUE(same_bytes(download<std::byte>(out, n), want, encoded_row_bytes(kind, kF)))
        << to_string(kind);
    EXPECT_TRUE(same_floats(got_ranges, want_ranges, 1)) << to_string(kind);
  }
}

TEST_F(CudaCodec, GpuTensorsNeedGpuBytes) {
  const Tensor x = source_tensor(3, 8, false, 1).to(kGpu);
  const std::vector<NodeId> rows = {0, 2};
  const std::vector<GlobalId> ids = ids_of(rows);
  std::vector<std::byte> host_bytes(rows.size() * encoded_row_bytes(CodecKind::Int4, 8));
  EXPECT_THROW(encode_rows(CodecKind::Int4, host_bytes, x, rows, ids, kNoise), Error);
  Tensor out(2, 8, DType::F32, kGpu);
  EXPECT_THROW(decode_rows(CodecKind::Int4, out, 0, 2, host_bytes), Error);
}

}  // namespace
}  // namespace tessera
