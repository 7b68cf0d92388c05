// SPDX-License-Identifier: Apache-2.0
// Streaming gzip text I/O for the OGB raw layout, and the CSV field parsers used on its lines.
// GzipLineReader yields the lines of a .gz file without holding the file in memory (a background
// thread inflates the next block while the caller parses the current one); GzipWriter writes a
// deterministic gzip file (mtime 0). Fields are parsed with std::from_chars. Relies on zlib.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

namespace tessera {

namespace detail {
struct GzipBlock;  // a block of whole lines of text (gzip_stream.cc)
}  // namespace detail

class GzipLineReader {
 public:
  // Opens `path`; throws Io when it cannot be opened, InvalidInput when it is not a gzip file.
  // With `progress`, a bar on stderr follows the compressed bytes read (large files only).
  explicit GzipLineReader(const std::filesystem::path& path, bool progress = false);
  ~GzipLineReader();
  GzipLineReader(const GzipLineReader&) = delete;
  GzipLineReader& operator=(const GzipLineReader&) = delete;

  // The next line without its '\n' (nor a trailing '\r'); false at the end of the file. The view
  // stays valid until the next call. Throws InvalidInput "<path>: truncated or corrupt gzip
  // (zlib: ...)" when the stream is damaged (after the lines before the damage).
  bool next_line(std::string_view& line);
  // Same, skipping blank lines as pandas.read_csv does (line numbers still count them).
  bool next_record(std::string_view& line);

  // 1-based number of the line last returned (0 before the first call).
  std::int64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }
  // "<path>:<line>" of the line last returned (just "<path>" before the first), for messages.
  std::string where() const;
  // Decompressed bytes handed out so far (including line ends).
  std::uint64_t text_bytes() const { return text_bytes_; }

 private:
  struct Shared;
  void produce();
  bool next_block();

  std::string path_;
  std::unique_ptr<Shared> shared_;
  std::thread producer_;
  detail::GzipBlock* current_ = nullptr;
  std::size_t position_ = 0;
  std::int64_t line_number_ = 0;
  std::uint64_t text_bytes_ = 0;
  bool at_end_ = false;
};

class GzipWriter {
 public:
  // Creates `path` (level 1-9); throws Io when it cannot. Output is deterministic.
  explicit GzipWriter(const std::filesystem::path& path, int level = 6);
  ~GzipWriter();  // closes silently when close() was not reached (an error is in flight)
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;

  // Text to append; flushed to zlib in large pieces.
  std::string& buffer() { return buffer_; }
  void write(std::string_view text) {
    buffer_.append(text);
    maybe_flush();
  }
  // Compresses the buffer once it holds enough text; call after appending to buffer().
  void maybe_flush() {
    if (buffer_.size() >= kFlushBytes) flush();
  }
  // Flushes and closes; throws Io on any write error (disk full, ...).
  void close();

 private:
  static constexpr std::size_t kFlushBytes = std::size_t{1} << 20;
  void flush();

  std::string path_;
  void* file_ = nullptr;  // gzFile
  std::string buffer_;
};

// ---- CSV fields (OGB files hold numbers only: no quoting, comma separated) ----

// pandas' default missing-value tokens ("", "nan", "NaN", "NA", "null", "None", ...).
bool is_na_token(std::string_view field);
// Whole field (spaces around it allowed, a leading '+' too) as an integer / a float. A float
// goes decimal -> double -> float, as pandas' float64 followed by astype(float32) does; "nan"
// and "inf" are accepted (callers decide whether they are allowed).
bool parse_int64(std::string_view field, std::int64_t& value);
bool parse_float(std::string_view field, float& value);
// Number of comma-separated fields in a line.
std::int64_t count_fields(std::string_view line);
// The field with 0-based index `column` (the empty view when there is no such field).
std::string_view field_at(std::string_view line, std::int64_t column);
// A message saying why `line` is not `expected_columns` numbers (integers or floats):
// "expected 2 columns, found 3" or "column 2: 'x' is not an integer". Used after a fast parse
// failed, so it only runs on the error path.
std::string describe_bad_row(std::string_view line, std::int64_t expected_columns, bool integers);

namespace detail {
inline float narrow_to_float(double value) {
  constexpr double kOverflow = 0x1.ffffffp127;  // FLT_MAX + half an ulp: rounds to infinity
  if (std::fabs(value) >= kOverflow) {
    return std::signbit(value) ? -std::numeric_limits<float>::infinity()
                               : std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(value);
}
}  // namespace detail

// Fast paths for the hot loops: exactly `count` comma-separated values with nothing else on the
// line. They return false on anything unusual (then the caller re-parses fields one by one with
// parse_int64 / parse_float, which also accept spaces and '+', or reports describe_bad_row).
inline bool parse_int_row(std::string_view line, std::int64_t* out, std::int64_t count) {
  const char* p = line.data();
  const char* end = p + line.size();
  for (std::int64_t c = 0; c < count; ++c) {
    auto [next, ec] = std::from_chars(p, end, out[c]);
    if (ec != std::errc{}) return false;
    p = next;
    if (c + 1 < count) {
      if (p == end || *p != ',') return false;
      ++p;
    }
  }
  return p == end;
}

inline bool parse_float_row(std::string_view line, float* out, std::int64_t count) {
  const char* p = line.data();
  const char* end = p + line.size();
  for (std::int64_t c = 0; c < count; ++c) {
    double value;
    auto [next, ec] = std::from_chars(p, end, value);
    if (ec != std::errc{}) return false;
    out[c] = detail::narrow_to_float(value);
    p = next;
    if (c + 1 < count) {
      if (p == end || *p != ',') return false;
      ++p;
    }
  }
  return p == end;
}

}  // namespace tessera
