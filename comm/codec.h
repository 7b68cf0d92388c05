// SPDX-License-Identifier: Apache-2.0
// Message codecs for rows that cross ranks (halo embeddings forward, halo gradients backward,
// pipeline streams), one table of them (comm/codec_table.cc): none (f32), bf16 and fp16 (round
// to nearest even), and 8-, 4- and 2-bit integer codecs with a per-row offset and scale (f32)
// and stochastic rounding, so that a decoded value equals the original in expectation. Values
// are packed densely, row by row; the noise is drawn from the counter RNG keyed by (seed, epoch,
// layer, direction) for (global node id, feature), so it does not depend on the partitioning or
// the thread count. Every message starts with a header that the receiver checks (codec id,
// rows, width, size) before decoding a single value. GPU tensors (builds with the CUDA backend)
// encode and decode on the GPU (comm/codec_cuda.h), giving the same bytes and the same floats
// as the CPU bit for bit; headers are host memory only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/csr.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace tessera {

// A codec's wire id (the byte in every message header). The codecs themselves are the rows of
// the table in comm/codec_table.cc; adding one is a file with its row functions (see
// comm/codec_rows.h), an id here and a row there.
enum class CodecKind : std::uint8_t { None = 0, Bf16 = 1, Fp16 = 2, Int8 = 3, Int4 = 4, Int2 = 5 };

namespace cuda {
struct GpuCodec;  // comm/codec_cuda.h (builds with the CUDA backend)
}

// One codec: how a row of f floats becomes bytes and back.
struct CodecSpec {
  CodecKind kind;
  std::string_view name;  // what --codec takes
  int value_bits;         // bits per value on the wire (32 for none)
  bool stochastic;        // per-row offset and scale (8 bytes a row) and stochastic rounding
  // Encodes x (f values) into dst (encoded_row_bytes(kind, f) bytes) with `item` (the row's
  // global id) keying the noise; returns false, writing nothing, for a row the codec cannot
  // take (non-finite values). `range`, when not null, receives max - min of the row (NaN for a
  // row holding a NaN).
  bool (*encode_row)(std::byte* dst, const float* x, std::int64_t f, const CounterRng& rng,
                     std::uint64_t item, float* range);
  void (*decode_row)(float* out, const std::byte* src, std::int64_t f);
  // The CUDA twin (null in builds without the CUDA backend): bit-identical rows on the GPU.
  const cuda::GpuCodec* gpu;
};

// The codec table (comm/codec_table.cc), in id order.
std::span<const CodecSpec> codec_table();
// The entry of a wire id; null when the id is no codec's.
const CodecSpec* find_codec(std::uint8_t id);
const CodecSpec& codec_spec(CodecKind kind);  // InvalidArgument for an unknown id
// The codecs' names in table order ("none", "bf16", ...), and --codec's choices: those and
// "adaptive" (bits chosen per row by the halo exchange, comm/adaptive_bits.h).
std::vector<std::string> codec_names();
std::vector<std::string> codec_option_names();

// A codec by name; anything else: InvalidArgument listing the names.
CodecKind parse_codec(const std::string& name);
std::string_view to_string(CodecKind kind);
int value_bits(CodecKind kind);      // 32, 16, 16, 8, 4, 2
bool is_stochastic(CodecKind kind);  // the integer codecs
// Bytes of one encoded row of width f: the packed values, rounded up to whole bytes, plus for
// the integer codecs the row's offset and scale (two f32, 8 bytes).
std::size_t encoded_row_bytes(CodecKind kind, std::int64_t f);

// The stream a message's rounding noise comes from (purpose CodecForward / CodecBackward).
struct CodecNoise {
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::uint64_t layer = 0;
  RngPurpose purpose = RngPurpose::CodecForward;
};

// Encodes rows x[src_rows[i]], i in [0, R), into out (exactly R * encoded_row_bytes(kind, F)
// bytes, else InvalidArgument). row_ids[i] is the global node id of row i (the noise key).
// Parallel over rows; the bytes do not depend on the thread count. When `ranges` is not empty
// it receives max - min of every encoded row (R), the statistic adaptive bit planning uses.
// For a GPU x the work runs on the GPU's compute stream: out must be GPU memory, src_rows,
// row_ids and ranges may be host or GPU memory (GPU src_rows are not range-checked here); the
// bytes equal the CPU's for the same rows. The integer codecs then wait for the GPU, to report a
// non-finite row as the CPU does; the float codecs return without waiting (unless `ranges` is
// host memory).
void encode_rows(CodecKind kind, std::span<std::byte> out, const Tensor& x,
                 std::span<const NodeId> src_rows, std::span<const GlobalId> row_ids,
                 const CodecNoise& noise, std::span<float> ranges = {});
// Decodes num_rows rows from `in` (exactly num_rows * encoded_row_bytes bytes, else
// InvalidInput) into rows [first_row, first_row + num_rows) of out (F = out.cols()). For a GPU
// out, `in` must be GPU memory; the decoded floats equal the CPU's bit for bit.
void decode_rows(CodecKind kind, Tensor& out, std::int64_t first_row, std::int64_t num_rows,
                 std::span<const std::byte> in);

// The 16-byte header in front of every encoded message: magic, codec id, rows, width.
inline constexpr std::size_t kMessageHeaderBytes = 16;
void write_message_header(std::span<std::byte> out, CodecKind kind, std::int64_t rows,
                          std::int64_t cols);
// Checks a received message (header and total size) against what the receiver expects and
// returns its codec; InvalidInput naming `where` (e.g. "halo forward from rank 2, layer 1") for
// a short buffer, a bad magic, an unknown codec id, a codec other than `expected` (the adaptive
// codec's receivers know every block's width from the plan), other rows or width, or a size
// mismatch.
CodecKind read_message_header(std::span<const std::byte> in, std::int64_t rows, std::int64_t cols,
                              CodecKind expected, const std::string& where);
// The same check from a copy of the first kMessageHeaderBytes bytes of a message of
// `message_bytes` bytes (a message in GPU memory, whose header was copied to the host).
CodecKind read_message_header(std::span<const std::byte> header, std::size_t message_bytes,
                              std::int64_t rows, std::int64_t cols, CodecKind expected,
                              const std::string& where);

// `bytes` (u8, one column) made a buffer of `size` bytes on `device` (reallocated only when its
// size or device changes): an encoded message where its rows live.
std::span<std::byte> message_buffer(Tensor& bytes, std::size_t size, Device device);

// The same two for a message in the memory of `device`: in GPU memory the header is written on
// the host and copied up, or copied down and checked on the host.
void write_message_header(std::span<std::byte> out, Device device, CodecKind kind,
                          std::int64_t rows, std::int64_t cols);
CodecKind read_message_header(std::span<const std::byte> in, Device device, std::int64_t rows,
                              std::int64_t cols, CodecKind expected, const std::string& where);

}  // namespace tessera
