// SPDX-License-Identifier: Apache-2.0
// Message codecs (comm/codec.h): the table's lookups, the row loops around each codec's row
// functions (comm/codec_table.cc, comm/codec_rows.h) — argument checks, OpenMP over rows, the
// first refused row reported by name — and the message headers. GPU tensors go to the codecs'
// CUDA twins (comm/codec_cuda.h; builds with TESSERA_HAVE_CUDA_CODECS), which are told the two
// things this CPU build decides that the bytes depend on. Relies on core (Tensor, CounterRng,
// Error) and OpenMP.
#include "comm/codec.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "comm/codec_rows.h"
#include "core/cpu/dispatch.h"
#include "core/error.h"

#ifdef TESSERA_HAVE_CUDA_CODECS
#include <vector>

#include "comm/codec_cuda.h"
#include "core/cuda/runtime.h"
#include "core/cuda/staging.h"
#endif

namespace tessera {
namespace {

// Rows are written with memcpy of host values; the wire format is little-endian.
static_assert(std::endian::native == std::endian::little,
              "codec wire format assumes little-endian");

constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 15;  // as core/cpu
constexpr std::uint8_t kMagic[4] = {'T', 'S', 'R', 'M'};

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

// row_stats takes min and max in 8 AVX2 lanes at the CPU kernels' level 2 and up (the lanes
// decide whether +0 or -0 becomes the offset of a row whose minimum is zero); the GPU follows
// the same preference.
bool stats_in_lanes8() { return cpu::cpu_level() >= cpu::CpuLevel::Avx2; }

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
void encode_rows_gpu(const CodecSpec& codec, std::span<std::byte> out, const Tensor& x,
                     std::span<const NodeId> src_rows, std::span<const GlobalId> row_ids,
                     const CodecNoise& noise, std::span<float> ranges) {
  const auto r = static_cast<std::int64_t>(src_rows.size());
  const std::int64_t f = x.cols();
  TESSERA_CHECK(out.empty() || cuda::is_device_memory(out.data()), InvalidArgument,
                "encode_rows: x is on ", to_string(x.device()),
                ", so out must be GPU memory, found host memory");
  TESSERA_CHECK(codec.gpu != nullptr, InvalidArgument, "codec ", codec.name,
                " has no GPU twin (comm/codec_table.cc): encode on the host");
  const cuda::DeviceInput<NodeId> rows(src_rows);
  const cuda::DeviceInput<GlobalId> ids(row_ids);
  cuda::DeviceOutput<float> range_out(ranges);
  const CounterRng rng(noise.seed, noise.epoch, noise.layer, noise.purpose);
  const std::int64_t refused = codec.gpu->encode(out.data(), range_out.get(), x.f32(), rows.get(),
                                                 ids.get(), r, f, rng.key(), stats_in_lanes8());
  range_out.finish();
  if (refused < r) {
    NodeId src_row = 0;
    GlobalId id = 0;
    cuda::download(&src_row, rows.get() + refused, sizeof(src_row));
    cuda::download(&id, ids.get() + refused, sizeof(id));
    std::vector<float> row(static_cast<std::size_t>(f));
    cuda::download(row.data(), x.f32() + std::int64_t{src_row} * f, row.size() * sizeof(float));
    fail_non_finite(codec.kind, row.data(), f, refused, src_row, id);
  }
}

// Whether the host may read a span's memory (GPU-resident callers validated theirs).
bool host_readable(const void* ptr) { return !cuda::is_device_memory(ptr); }
#else
constexpr bool kGpuCodecs = false;
bool host_readable(const void*) { return true; }
#endif

}  // namespace

const CodecSpec* find_codec(std::uint8_t id) {
  const std::span<const CodecSpec> table = codec_table();
  return id < table.size() ? &table[id] : nullptr;
}

const CodecSpec& codec_spec(CodecKind kind) {
  const CodecSpec* codec = find_codec(static_cast<std::uint8_t>(kind));
  TESSERA_CHECK(codec != nullptr, InvalidArgument, "unknown codec id ", static_cast<int>(kind));
  return *codec;
}

std::vector<std::string> codec_names() {
  // Every level's table has the same codecs: the baseline's names them without resolving the
  // level in use (a bad TESSERA_CPU is reported by whoever trains, not by a flag listing).
  std::vector<std::string> names;
  for (const CodecSpec& codec : detail::baseline::level_codec_table())
    names.emplace_back(codec.name);
  return names;
}

std::vector<std::string> codec_option_names() {
  std::vector<std::string> names = codec_names();
  names.emplace_back("adaptive");
  return names;
}

CodecKind parse_codec(const std::string& name) {
  for (const CodecSpec& codec : codec_table())
    if (name == codec.name) return codec.kind;
  TESSERA_FAIL(InvalidArgument, "unknown codec '", name, "': expected one of ",
               detail::join_names(codec_names()));
}

std::string_view to_string(CodecKind kind) {
  const CodecSpec* codec = find_codec(static_cast<std::uint8_t>(kind));
  return codec != nullptr ? codec->name : "unknown";
}

int value_bits(CodecKind kind) { return codec_spec(kind).value_bits; }

bool is_stochastic(CodecKind kind) {
  const CodecSpec* codec = find_codec(static_cast<std::uint8_t>(kind));
  return codec != nullptr && codec->stochastic;
}

std::size_t encoded_row_bytes(CodecKind kind, std::int64_t f) {
  TESSERA_CHECK(f >= 0, InvalidArgument, "encoded_row_bytes: width must be >= 0, got ", f);
  const CodecSpec& codec = codec_spec(kind);
  return static_cast<std::size_t>((f * codec.value_bits + 7) / 8) +
         (codec.stochastic ? detail::kScaleBytes : 0);
}

void encode_rows(CodecKind kind, std::span<std::byte> out, const Tensor& x,
                 std::span<const NodeId> src_rows, std::span<const GlobalId> row_ids,
                 const CodecNoise& noise, std::span<float> ranges) {
  const CodecSpec& codec = codec_spec(kind);
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
                " rows of width ", f, " (", codec.name, "), got ", out.size());
  const bool check_rows = !on_gpu || host_readable(src_rows.data());
  for (std::int64_t i = 0; i < r && check_rows; ++i) {
    const NodeId s = src_rows[static_cast<std::size_t>(i)];
    TESSERA_CHECK(s >= 0 && s < x.rows(), InvalidArgument, "encode_rows: source row ", s,
                  " (entry ", i, ") outside [0, ", x.rows(), ")");
  }
  if (r == 0) return;
#ifdef TESSERA_HAVE_CUDA_CODECS
  if (on_gpu) return encode_rows_gpu(codec, out, x, src_rows, row_ids, noise, ranges);
#endif
  if (f == 0 && !codec.stochastic) {  // nothing to write; an integer row still has its scale
    std::fill(ranges.begin(), ranges.end(), 0.0f);
    return;
  }
  const float* xd = x.f32();
  auto x_row = [&](std::int64_t i) {
    return xd + std::int64_t{src_rows[static_cast<std::size_t>(i)]} * f;
  };
  const CounterRng rng(noise.seed, noise.epoch, noise.layer, noise.purpose);
  const std::int64_t refused = for_each_row(r, f, [&](std::int64_t i) {
    const auto at = static_cast<std::size_t>(i);
    return codec.encode_row(out.data() + at * row_bytes, x_row(i), f, rng,
                            static_cast<std::uint64_t>(row_ids[at]),
                            ranges.empty() ? nullptr : &ranges[at]);
  });
  if (refused < r) {
    fail_non_finite(kind, x_row(refused), f, refused, src_rows[static_cast<std::size_t>(refused)],
                    row_ids[static_cast<std::size_t>(refused)]);
  }
}

void decode_rows(CodecKind kind, Tensor& out, std::int64_t first_row, std::int64_t num_rows,
                 std::span<const std::byte> in) {
  const CodecSpec& codec = codec_spec(kind);
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
                " bytes for ", num_rows, " rows of width ", f, " (", codec.name, "), got ",
                in.size());
  if (num_rows == 0 || f == 0) return;
#ifdef TESSERA_HAVE_CUDA_CODECS
  if (on_gpu) {
    TESSERA_CHECK(cuda::is_device_memory(in.data()), InvalidArgument, "decode_rows: out is on ",
                  to_string(out.device()), ", so `in` must be GPU memory, found host memory");
    TESSERA_CHECK(codec.gpu != nullptr, InvalidArgument, "codec ", codec.name,
                  " has no GPU twin (comm/codec_table.cc): decode on the host");
    return codec.gpu->decode(out.f32() + first_row * f, in.data(), num_rows, f,
                             cpu_decode_is_fused());
  }
#endif
  float* od = out.f32() + first_row * f;
#pragma omp parallel for schedule(static) if (num_rows * f >= kParallelMinWork)
  for (std::int64_t i = 0; i < num_rows; ++i)
    codec.decode_row(od + i * f, in.data() + static_cast<std::size_t>(i) * row_bytes, f);
}

void write_message_header(std::span<std::byte> out, CodecKind kind, std::int64_t rows,
                          std::int64_t cols) {
  constexpr std::int64_t kMax = std::numeric_limits<std::uint32_t>::max();
  TESSERA_CHECK(out.size() >= kMessageHeaderBytes, InvalidArgument, "write_message_header: need ",
                kMessageHeaderBytes, " bytes, got ", out.size());
  TESSERA_CHECK(find_codec(static_cast<std::uint8_t>(kind)) != nullptr, InvalidArgument,
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

std::span<std::byte> message_buffer(Tensor& bytes, std::size_t size, Device device) {
  if (bytes.dtype() != DType::U8 || bytes.device() != device)
    bytes = Tensor(0, 1, DType::U8, device);
  bytes.resize(static_cast<std::int64_t>(size), 1);
  return {static_cast<std::byte*>(bytes.raw()), size};
}

void write_message_header(std::span<std::byte> out, Device device, CodecKind kind,
                          std::int64_t rows, std::int64_t cols) {
  if (device.kind == DeviceKind::Cpu) return write_message_header(out, kind, rows, cols);
  std::array<std::byte, kMessageHeaderBytes> header{};
  write_message_header(header, kind, rows, cols);
  TESSERA_CHECK(out.size() >= header.size(), InvalidArgument, "write_message_header: need ",
                kMessageHeaderBytes, " bytes, got ", out.size());
  backend(device).copy(out.data(), header.data(), header.size());
}

CodecKind read_message_header(std::span<const std::byte> in, Device device, std::int64_t rows,
                              std::int64_t cols, CodecKind expected, const std::string& where) {
  if (device.kind == DeviceKind::Cpu) return read_message_header(in, rows, cols, expected, where);
  std::array<std::byte, kMessageHeaderBytes> header{};
  const std::size_t have = std::min(in.size(), header.size());
  if (have > 0) backend(device).copy(header.data(), in.data(), have);
  return read_message_header(std::span<const std::byte>(header).first(have), in.size(), rows, cols,
                             expected, where);
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
  TESSERA_CHECK(find_codec(id) != nullptr, InvalidInput, where, ": unknown codec id ", int{id},
                " (expected 0..", codec_table().size() - 1, ")");
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
