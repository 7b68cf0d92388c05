// SPDX-License-Identifier: Apache-2.0
// GzipLineReader (zlib gzread into 4 MiB blocks on a producer thread, a small pool of blocks
// handed to the parsing thread through a queue), GzipWriter (gzwrite, mtime 0) and the CSV
// field parsers. Errors: Io for open/read/write failures, InvalidInput for damaged gzip data.
#include "datasets/gzip_stream.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <vector>

#include "datasets/progress.h"
#include "core/error.h"

namespace tessera {
namespace {

constexpr std::size_t kBlockBytes = std::size_t{4} << 20;      // text per block (large files)
constexpr std::size_t kMinBlockBytes = std::size_t{64} << 10;  // ... small files
// gzread piece: a data error discards the piece being inflated, so this bounds how far the line
// number in the message can be from the damage; >= 2 x kZlibBufferBytes inflates in place.
constexpr std::size_t kReadPieceBytes = std::size_t{1} << 20;
constexpr std::size_t kMaxLineBytes = std::size_t{256} << 20;  // refuse longer lines
constexpr int kBlocksInFlight = 3;
constexpr unsigned kZlibBufferBytes = 256u << 10;
constexpr std::uintmax_t kProgressMinBytes = std::uintmax_t{16} << 20;  // bar for larger files

// gzerror's text without the "<path>: " zlib puts in front.
std::string zlib_message(gzFile file, const std::string& path, int* errnum) {
  const char* message = gzerror(file, errnum);
  if (*errnum == Z_ERRNO) return std::strerror(errno);
  std::string text = message ? message : "unknown error";
  if (text.rfind(path + ": ", 0) == 0) text.erase(0, path.size() + 2);
  return text;
}

std::string_view trim(std::string_view field) {
  while (!field.empty() && (field.front() == ' ' || field.front() == '\t')) field.remove_prefix(1);
  while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.remove_suffix(1);
  return field;
}

}  // namespace

namespace detail {
struct GzipBlock {
  std::unique_ptr<char[]> text;  // uninitialised; allocated by the producer on first use
  std::size_t capacity = 0;
  std::size_t size = 0;                 // bytes of whole lines handed out
  std::uint64_t compressed_offset = 0;  // compressed bytes consumed once this block was read
};
}  // namespace detail

namespace {

struct FillResult {
  bool eof = false;
  std::optional<ErrorCategory> damage_category;  // set: stream damaged (message in damage)
  std::string damage;
};

// Fills `block` with the carried partial line plus freshly inflated text, keeps whole lines in
// it (all of them at the end of the file or before damage) and carries the rest over.
FillResult fill_block(gzFile file, const std::string& path, std::size_t block_bytes,
                      detail::GzipBlock& block, std::vector<char>& carry) {
  if (block.capacity < carry.size() + block_bytes / 2) {
    block.capacity = carry.size() + block_bytes;
    block.text = std::make_unique_for_overwrite<char[]>(block.capacity);
  }
  if (!carry.empty()) std::memcpy(block.text.get(), carry.data(), carry.size());
  std::size_t size = carry.size();
  carry.clear();
  FillResult result;
  for (;;) {
    std::size_t want = std::min(block.capacity - size, kReadPieceBytes);
    int got = gzread(file, block.text.get() + size, static_cast<unsigned>(want));
    int errnum = Z_OK;
    std::string message;
    if (got < 0 || static_cast<std::size_t>(got) < want) message = zlib_message(file, path, &errnum);
    if (got > 0) size += static_cast<std::size_t>(got);
    if (got < 0 || errnum != Z_OK) {
      result.damage_category = errnum == Z_ERRNO ? ErrorCategory::Io : ErrorCategory::InvalidInput;
      result.damage = errnum == Z_ERRNO
                          ? "read error (" + message + ")"
                          : "truncated or corrupt gzip (zlib: " + message + "; detected at this line)";
      break;
    }
    if (static_cast<std::size_t>(got) < want) {
      result.eof = true;
      break;
    }
    if (size < block.capacity) continue;  // fill the block piece by piece
    if (std::memchr(block.text.get(), '\n', size)) break;
    // No line end in the whole block: one very long line; grow and read on.
    TESSERA_CHECK(block.capacity < kMaxLineBytes, InvalidInput, path, ": a line longer than ",
                  kMaxLineBytes >> 20, " MiB (not a CSV file?)");
    auto grown = std::make_unique_for_overwrite<char[]>(2 * block.capacity);
    std::memcpy(grown.get(), block.text.get(), size);
    block.text = std::move(grown);
    block.capacity *= 2;
  }
  std::size_t line_end = size;  // bytes up to and including the last '\n'
  if (!result.eof) {
    while (line_end > 0 && block.text[line_end - 1] != '\n') --line_end;
  }
  if (!result.damage_category) carry.assign(block.text.get() + line_end, block.text.get() + size);
  block.size = line_end;
  block.compressed_offset = static_cast<std::uint64_t>(gzoffset(file));
  return result;
}

}  // namespace

// ---- GzipLineReader ----

// Producer/consumer state. The producer fills free blocks and queues them in file order; an
// end marker (null block) or an exception ends the queue.
struct GzipLineReader::Shared {
  gzFile file = nullptr;
  std::uintmax_t compressed_size = 0;
  std::size_t block_bytes = kBlockBytes;
  std::unique_ptr<ProgressBar> progress;

  std::mutex mutex;
  std::condition_variable changed;
  std::array<detail::GzipBlock, kBlocksInFlight> blocks;
  std::vector<detail::GzipBlock*> free_blocks;
  std::deque<detail::GzipBlock*> ready;  // nullptr = end of file
  // Raised after the blocks queued before it: a damaged stream (InvalidInput / Io, message
  // without the "<path>:<line>: " prefix, which the consumer adds) or any other exception.
  std::exception_ptr error;
  std::optional<ErrorCategory> damage_category;
  std::string damage;
  bool stop = false;
};

GzipLineReader::GzipLineReader(const std::filesystem::path& path, bool progress)
    : path_(path.string()), shared_(std::make_unique<Shared>()) {
  std::error_code ec;
  TESSERA_CHECK(std::filesystem::is_regular_file(path, ec), Io, path_,
                ": file not found (or not a regular file)");
  shared_->compressed_size = std::filesystem::file_size(path, ec);
  // Check the gzip magic ourselves: zlib would read a plain file transparently.
  {
    std::FILE* raw = std::fopen(path_.c_str(), "rb");
    TESSERA_CHECK(raw != nullptr, Io, path_, ": cannot open (", std::strerror(errno), ")");
    unsigned char magic[2] = {0, 0};
    std::size_t got = std::fread(magic, 1, 2, raw);
    std::fclose(raw);
    TESSERA_CHECK(got == 2 && magic[0] == 0x1f && magic[1] == 0x8b, InvalidInput, path_,
                  ": not a gzip file", got < 2 ? " (shorter than a gzip header)" : "");
  }
  shared_->file = gzopen(path_.c_str(), "rb");
  TESSERA_CHECK(shared_->file != nullptr, Io, path_, ": cannot open (", std::strerror(errno), ")");
  gzbuffer(shared_->file, kZlibBufferBytes);
  if (progress && shared_->compressed_size >= kProgressMinBytes) {
    shared_->progress = std::make_unique<ProgressBar>(path.filename().string(),
                                                      shared_->compressed_size, true);
  }
  // Text is rarely more than ~8x its gzip size: small files get small blocks.
  shared_->block_bytes = static_cast<std::size_t>(std::clamp<std::uintmax_t>(
      8 * shared_->compressed_size + 4096, kMinBlockBytes, kBlockBytes));
  for (detail::GzipBlock& block : shared_->blocks) shared_->free_blocks.push_back(&block);
  producer_ = std::thread([this] { produce(); });
}

GzipLineReader::~GzipLineReader() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stop = true;
  }
  shared_->changed.notify_all();
  if (producer_.joinable()) producer_.join();
  if (shared_->file) gzclose(shared_->file);
}

void GzipLineReader::produce() {
  Shared& s = *shared_;
  std::vector<char> carry;  // the unfinished last line of the previous block
  try {
    for (;;) {
      detail::GzipBlock* block = nullptr;
      {
        std::unique_lock lock(s.mutex);
        s.changed.wait(lock, [&] { return s.stop || !s.free_blocks.empty(); });
        if (s.stop) return;
        block = s.free_blocks.back();
        s.free_blocks.pop_back();
      }
      FillResult result = fill_block(s.file, path_, s.block_bytes, *block, carry);
      {
        std::lock_guard lock(s.mutex);
        s.ready.push_back(block);
        if (result.damage_category) {
          s.damage_category = result.damage_category;
          s.damage = std::move(result.damage);
        } else if (result.eof) {
          s.ready.push_back(nullptr);
        }
      }
      s.changed.notify_all();
      if (result.eof || result.damage_category) return;
    }
  } catch (...) {
    {
      std::lock_guard lock(s.mutex);
      s.error = std::current_exception();
    }
    s.changed.notify_all();
  }
}

bool GzipLineReader::next_block() {
  Shared& s = *shared_;
  std::unique_lock lock(s.mutex);
  if (current_) {
    s.free_blocks.push_back(current_);
    current_ = nullptr;
    s.changed.notify_all();
  }
  s.changed.wait(lock, [&] { return !s.ready.empty() || s.error || s.damage_category; });
  if (s.ready.empty()) {
    at_end_ = true;
    if (s.error) std::rethrow_exception(s.error);
    throw Error(*s.damage_category,
                detail::concat(path_, ":", line_number_ + 1, ": ", s.damage), __FILE__, __LINE__);
  }
  detail::GzipBlock* block = s.ready.front();
  s.ready.pop_front();
  if (!block) {
    at_end_ = true;
    if (s.progress) s.progress->finish();
    return false;
  }
  current_ = block;
  position_ = 0;
  if (s.progress) s.progress->update(block->compressed_offset);
  return true;
}

bool GzipLineReader::next_line(std::string_view& line) {
  for (;;) {
    if (current_ && position_ < current_->size) {
      const char* begin = current_->text.get() + position_;
      const char* end = current_->text.get() + current_->size;
      const char* newline =
          static_cast<const char*>(std::memchr(begin, '\n', static_cast<std::size_t>(end - begin)));
      const char* line_end = newline ? newline : end;
      std::size_t consumed = static_cast<std::size_t>((newline ? newline + 1 : end) - begin);
      position_ += consumed;
      text_bytes_ += consumed;
      if (line_end > begin && line_end[-1] == '\r') --line_end;
      line = std::string_view(begin, static_cast<std::size_t>(line_end - begin));
      ++line_number_;
      return true;
    }
    if (at_end_ || !next_block()) return false;
  }
}

bool GzipLineReader::next_record(std::string_view& line) {
  while (next_line(line)) {
    if (!line.empty()) return true;
  }
  return false;
}

std::string GzipLineReader::where() const {
  return line_number_ > 0 ? path_ + ":" + std::to_string(line_number_) : path_;
}

// ---- GzipWriter ----

GzipWriter::GzipWriter(const std::filesystem::path& path, int level) : path_(path.string()) {
  TESSERA_CHECK(level >= 1 && level <= 9, InvalidArgument, "gzip level ", level,
                " (expected 1..9)");
  std::string mode = "wb" + std::to_string(level);
  file_ = gzopen(path_.c_str(), mode.c_str());
  TESSERA_CHECK(file_ != nullptr, Io, path_, ": cannot create (", std::strerror(errno), ")");
  gzbuffer(static_cast<gzFile>(file_), kZlibBufferBytes);
  buffer_.reserve(kFlushBytes + (kFlushBytes >> 2));
}

GzipWriter::~GzipWriter() {
  if (file_) gzclose(static_cast<gzFile>(file_));
}

void GzipWriter::flush() {
  std::size_t done = 0;
  while (done < buffer_.size()) {
    unsigned piece = static_cast<unsigned>(std::min<std::size_t>(buffer_.size() - done, 1u << 30));
    int wrote = gzwrite(static_cast<gzFile>(file_), buffer_.data() + done, piece);
    if (wrote <= 0) {
      int errnum = Z_OK;
      std::string message = zlib_message(static_cast<gzFile>(file_), path_, &errnum);
      TESSERA_FAIL(Io, path_, ": write failed (", message, ")");
    }
    done += static_cast<std::size_t>(wrote);
  }
  buffer_.clear();
}

void GzipWriter::close() {
  TESSERA_CHECK(file_ != nullptr, Internal, path_, ": closed twice");
  flush();
  gzFile file = static_cast<gzFile>(file_);
  file_ = nullptr;
  int status = gzclose(file);
  TESSERA_CHECK(status == Z_OK, Io, path_, ": write failed on close (zlib status ", status,
                status == Z_ERRNO ? std::string(", ") + std::strerror(errno) : std::string(),
                ")");
}

// ---- fields ----

bool is_na_token(std::string_view field) {
  static constexpr std::string_view kTokens[] = {
      "",     "#N/A", "#N/A N/A", "#NA",  "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
      "1.#QNAN", "<NA>", "N/A",   "NA",   "NULL",    "NaN",      "None", "n/a",  "nan",
      "null"};
  field = trim(field);
  return std::find(std::begin(kTokens), std::end(kTokens), field) != std::end(kTokens);
}

bool parse_int64(std::string_view field, std::int64_t& value) {
  field = trim(field);
  if (!field.empty() && field.front() == '+') field.remove_prefix(1);
  if (field.empty()) return false;
  auto [next, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  return ec == std::errc{} && next == field.data() + field.size();
}

bool parse_float(std::string_view field, float& value) {
  field = trim(field);
  if (!field.empty() && field.front() == '+') field.remove_prefix(1);
  if (field.empty()) return false;
  double parsed = 0.0;
  auto [next, ec] = std::from_chars(field.data(), field.data() + field.size(), parsed);
  if (next != field.data() + field.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // Beyond double's range: strtod gives +-HUGE_VAL (-> inf) or a correctly signed 0.
    std::string copy(field);
    parsed = std::strtod(copy.c_str(), nullptr);
  } else if (ec != std::errc{}) {
    return false;
  }
  value = detail::narrow_to_float(parsed);
  return true;
}

std::int64_t count_fields(std::string_view line) {
  return 1 + static_cast<std::int64_t>(std::count(line.begin(), line.end(), ','));
}

std::string_view field_at(std::string_view line, std::int64_t column) {
  for (std::int64_t c = 0; c < column; ++c) {
    std::size_t comma = line.find(',');
    if (comma == std::string_view::npos) return {};
    line.remove_prefix(comma + 1);
  }
  return line.substr(0, line.find(','));
}

std::string describe_bad_row(std::string_view line, std::int64_t expected_columns, bool integers) {
  std::int64_t found = count_fields(line);
  if (found != expected_columns) {
    return detail::concat("expected ", expected_columns, " column", expected_columns == 1 ? "" : "s",
                          ", found ", found);
  }
  for (std::int64_t c = 0; c < found; ++c) {
    std::string_view field = field_at(line, c);
    std::int64_t int_value = 0;
    float float_value = 0.0f;
    bool ok = integers ? parse_int64(field, int_value) : parse_float(field, float_value);
    if (!ok) {
      std::string shown(field.substr(0, 40));
      if (field.size() > 40) shown += "...";
      return detail::concat("column ", c + 1, ": '", shown, "' is not ",
                            integers ? "an integer" : "a number");
    }
  }
  return "cannot parse the line";
}

}  // namespace tessera
