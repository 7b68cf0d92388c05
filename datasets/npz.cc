// SPDX-License-Identifier: Apache-2.0
// .npz archives through libzip (members are read sequentially through zip_fread, inflating as
// they go) and .npy headers parsed here: "\x93NUMPY", a version byte pair, the header length
// (2 bytes in version 1, 4 in versions 2 and 3) and a Python dict literal with 'descr',
// 'fortran_order' and 'shape'.
#include "datasets/npz.h"

#include <zip.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "core/error.h"

namespace tessera::npz {
namespace {

constexpr std::size_t kBlockBytes = std::size_t{1} << 20;  // one read's worth of element bytes
constexpr std::int64_t kMaxHeaderBytes = std::int64_t{1} << 20;

// The value after `key` in the header dict: "'descr': '<f4'" -> "'<f4'" (up to the next ',' at
// depth 0 or the closing brace).
std::string dict_value(const std::string& dict, const std::string& key, const std::string& where) {
  const std::string quoted[2] = {"'" + key + "'", "\"" + key + "\""};
  std::size_t at = std::string::npos;
  for (const std::string& q : quoted) {
    at = dict.find(q);
    if (at != std::string::npos) {
      at += q.size();
      break;
    }
  }
  TESSERA_CHECK(at != std::string::npos, InvalidInput, where, ": the .npy header has no '", key,
                "' (header: ", dict, ")");
  at = dict.find(':', at);
  TESSERA_CHECK(at != std::string::npos, InvalidInput, where, ": malformed .npy header ", dict);
  ++at;
  int depth = 0;
  std::size_t end = at;
  for (; end < dict.size(); ++end) {
    const char c = dict[end];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    if (depth < 0) break;
  }
  std::string value = dict.substr(at, end - at);
  const auto first = value.find_first_not_of(" \t");
  const auto last = value.find_last_not_of(" \t");
  return first == std::string::npos ? "" : value.substr(first, last - first + 1);
}

std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& where) {
  TESSERA_CHECK(text.size() >= 2 && text.front() == '(' && text.back() == ')', InvalidInput, where,
                ": the .npy shape '", text, "' is not a tuple");
  std::vector<std::int64_t> shape;
  std::size_t at = 1;
  while (at < text.size() - 1) {
    while (at < text.size() - 1 && (text[at] == ' ' || text[at] == ',')) ++at;
    if (at >= text.size() - 1) break;
    std::int64_t value = 0;
    std::size_t digits = 0;
    while (at < text.size() - 1 && text[at] >= '0' && text[at] <= '9') {
      TESSERA_CHECK(value <= (std::numeric_limits<std::int64_t>::max() - 9) / 10, InvalidInput,
                    where, ": the .npy shape ", text, " overflows 64 bits");
      value = value * 10 + (text[at] - '0');
      ++at;
      ++digits;
    }
    if (at < text.size() - 1 && text[at] == 'L') ++at;  // Python 2's long suffix
    TESSERA_CHECK(digits > 0, InvalidInput, where, ": the .npy shape ", text,
                  " holds something other than non-negative integers");
    shape.push_back(value);
  }
  return shape;
}

std::int64_t checked_count(const std::vector<std::int64_t>& shape, const std::string& where) {
  std::int64_t count = 1;
  for (const std::int64_t d : shape) {
    TESSERA_CHECK(d == 0 || count <= std::numeric_limits<std::int64_t>::max() / 16 / d,
                  InvalidInput, where, ": the .npy shape is too large");
    count *= d;
  }
  return count;
}

std::string zip_error_text(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

}  // namespace

std::int64_t ArrayInfo::count() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

ArrayInfo parse_header(const std::string& bytes, const std::string& where,
                       std::size_t* data_offset) {
  static const char kMagic[] = "\x93NUMPY";
  TESSERA_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, kMagic, 6) == 0, InvalidInput, where,
                ": not an .npy array (no \\x93NUMPY magic)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  TESSERA_CHECK(major >= 1 && major <= 3, InvalidInput, where, ": .npy format version ",
                static_cast<int>(major), " is not supported (1, 2 or 3)");
  std::size_t length = 0;
  std::size_t start = 0;
  if (major == 1) {
    length = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    start = 10;
  } else {
    TESSERA_CHECK(bytes.size() >= 12, InvalidInput, where, ": truncated .npy header");
    for (int i = 3; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[8 + i]);
    start = 12;
  }
  TESSERA_CHECK(static_cast<std::int64_t>(length) <= kMaxHeaderBytes &&
                    bytes.size() >= start + length,
                InvalidInput, where, ": truncated .npy header (", length, " bytes announced)");
  const std::string dict = bytes.substr(start, length);
  ArrayInfo info;
  std::string descr = dict_value(dict, "descr", where);
  TESSERA_CHECK(descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"'),
                InvalidInput, where, ": 'descr' is ", descr,
                ", not a simple dtype (structured arrays are not supported)");
  descr = descr.substr(1, descr.size() - 2);
  info.descr = descr;
  TESSERA_CHECK(descr.size() >= 3, InvalidInput, where, ": dtype '", descr, "' is not supported");
  const char order = descr[0];
  TESSERA_CHECK(order == '<' || order == '|' || (order == '=' && std::endian::native ==
                                                                    std::endian::little),
                InvalidInput, where, ": dtype '", descr,
                "' is big-endian; expected little-endian data ('<')");
  info.kind = descr[1];
  info.item_size = std::atoi(descr.c_str() + 2);
  const bool known = (info.kind == 'f' && (info.item_size == 4 || info.item_size == 8)) ||
                     ((info.kind == 'i' || info.kind == 'u') &&
                      (info.item_size == 1 || info.item_size == 2 || info.item_size == 4 ||
                       info.item_size == 8)) ||
                     (info.kind == 'b' && info.item_size == 1);
  TESSERA_CHECK(known, InvalidInput, where, ": dtype '", descr,
                "' is not supported (float32/64, integers, bool)");
  const std::string fortran = dict_value(dict, "fortran_order", where);
  TESSERA_CHECK(fortran == "False", InvalidInput, where, ": fortran_order is ", fortran,
                "; expected a C-order array");
  info.shape = parse_shape(dict_value(dict, "shape", where), where);
  checked_count(info.shape, where);
  *data_offset = start + length;
  return info;
}

// ---- Archive ----

struct Archive::Zip {
  zip_t* zip = nullptr;
  ~Zip() {
    if (zip) zip_discard(zip);
  }
};

struct ArrayReader::File {
  zip_file_t* file = nullptr;
  ~File() {
    if (file) zip_fclose(file);
  }
};

Archive::Archive(const std::filesystem::path& file) : zip_(std::make_unique<Zip>()), path_(file) {
  int code = 0;
  zip_->zip = zip_open(path_.c_str(), ZIP_RDONLY, &code);
  if (!zip_->zip) {
    TESSERA_CHECK(code != ZIP_ER_NOENT && code != ZIP_ER_OPEN, Io, path_, ": cannot open (",
                  zip_error_text(code), ")");
    TESSERA_FAIL(InvalidInput, path_, ": not a readable .npz archive (", zip_error_text(code),
                 ")");
  }
}

Archive::Archive(Archive&&) noexcept = default;
Archive& Archive::operator=(Archive&&) noexcept = default;
Archive::~Archive() = default;

std::vector<std::string> Archive::names() const {
  std::vector<std::string> out;
  const zip_int64_t n = zip_get_num_entries(zip_->zip, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(zip_->zip, static_cast<zip_uint64_t>(i), 0);
    if (!name) continue;
    std::string s = name;
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".npy") == 0) s.resize(s.size() - 4);
    out.push_back(std::move(s));
  }
  return out;
}

bool Archive::has(const std::string& name) const {
  return zip_name_locate(zip_->zip, (name + ".npy").c_str(), 0) >= 0;
}

ArrayReader Archive::open(const std::string& name) const {
  const std::string member = name + ".npy";
  const std::string where = path_ + ":" + member;
  const zip_int64_t index = zip_name_locate(zip_->zip, member.c_str(), 0);
  if (index < 0) {
    std::string present;
    for (const std::string& n : names()) present += (present.empty() ? "" : ", ") + n;
    TESSERA_FAIL(InvalidInput, path_, ": no array '", name, "' (the archive holds: ",
                 present.empty() ? "nothing" : present, ")");
  }
  auto file = std::make_unique<ArrayReader::File>();
  file->file = zip_fopen_index(zip_->zip, static_cast<zip_uint64_t>(index), 0);
  TESSERA_CHECK(file->file, InvalidInput, where, ": cannot read (", zip_strerror(zip_->zip), ")");
  // The header: the fixed 10 or 12 bytes, then the announced length (NumPy pads to 64 bytes).
  std::string head(12, '\0');
  zip_int64_t got = zip_fread(file->file, head.data(), head.size());
  TESSERA_CHECK(got >= 0, InvalidInput, where, ": ", zip_file_strerror(file->file));
  head.resize(static_cast<std::size_t>(got));
  if (head.size() >= 10 && head.compare(0, 6, "\x93NUMPY", 6) == 0) {
    const bool v1 = static_cast<unsigned char>(head[6]) == 1;
    std::size_t length = 0;
    if (v1) {
      length = static_cast<unsigned char>(head[8]) | (static_cast<unsigned char>(head[9]) << 8);
    } else if (head.size() >= 12) {
      for (int i = 3; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(head[8 + i]);
    }
    const std::size_t total = (v1 ? 10 : 12) + std::min<std::size_t>(length, kMaxHeaderBytes);
    if (total > head.size()) {
      const std::size_t before = head.size();
      head.resize(total);
      got = zip_fread(file->file, head.data() + before, total - before);
      TESSERA_CHECK(got >= 0, InvalidInput, where, ": ", zip_file_strerror(file->file));
      head.resize(before + static_cast<std::size_t>(got));
    }
  }
  std::size_t offset = 0;
  ArrayInfo info = parse_header(head, where, &offset);
  // The member's size must be the header's and the shape's: a shape the data cannot fill is
  // refused before anything is sized by it.
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_stat_index(zip_->zip, static_cast<zip_uint64_t>(index), 0, &stat) == 0 &&
      (stat.valid & ZIP_STAT_SIZE) != 0) {
    const auto needed = static_cast<std::uint64_t>(offset) +
                        static_cast<std::uint64_t>(info.count()) *
                            static_cast<std::uint64_t>(info.item_size);
    TESSERA_CHECK(stat.size == needed, InvalidInput, where, ": the member holds ", stat.size,
                  " bytes; its header and shape ", info.count(), " x ", info.item_size,
                  " bytes need ", needed, " (truncated or not what its header says)");
  }
  return ArrayReader(std::move(file), std::move(info), where, head.substr(offset));
}

// ---- ArrayReader ----

ArrayReader::ArrayReader(std::unique_ptr<File> file, ArrayInfo info, std::string where,
                         std::string pending)
    : file_(std::move(file)),
      info_(std::move(info)),
      where_(std::move(where)),
      pending_(std::move(pending)),
      remaining_(info_.count()) {}

ArrayReader::ArrayReader(ArrayReader&&) noexcept = default;
ArrayReader& ArrayReader::operator=(ArrayReader&&) noexcept = default;
ArrayReader::~ArrayReader() = default;

void ArrayReader::next_bytes(char* bytes, std::size_t n) {
  if (n == 0) return;
  const std::size_t from_pending = std::min(n, pending_.size() - pending_at_);
  std::memcpy(bytes, pending_.data() + pending_at_, from_pending);
  pending_at_ += from_pending;
  std::size_t done = from_pending;
  while (done < n) {
    const zip_int64_t got = zip_fread(file_->file, bytes + done, n - done);
    TESSERA_CHECK(got >= 0, InvalidInput, where_, ": ", zip_file_strerror(file_->file));
    TESSERA_CHECK(got > 0, InvalidInput, where_, ": truncated: the data ends ",
                  (n - done) / static_cast<std::size_t>(info_.item_size) +
                      static_cast<std::size_t>(remaining_),
                  " elements before the shape's ", info_.count());
    done += static_cast<std::size_t>(got);
  }
  if (remaining_ == 0) finish();
}

// After the last element: the member must end there; reading to its end makes libzip check its
// CRC (a corrupted byte of a stored or deflated member).
void ArrayReader::finish() {
  TESSERA_CHECK(pending_at_ == pending_.size(), InvalidInput, where_,
                ": bytes follow the last element of the shape");
  char extra = 0;
  const zip_int64_t got = zip_fread(file_->file, &extra, 1);
  TESSERA_CHECK(got >= 0, InvalidInput, where_, ": ", zip_file_strerror(file_->file));
  TESSERA_CHECK(got == 0, InvalidInput, where_, ": bytes follow the last element of the shape");
}

namespace {

template <class T>
T load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

// Element i of a block as int64 (integers and bools) or double (any kind).
std::int64_t integer_at(const char* p, char kind, int size) {
  if (kind == 'u') {
    switch (size) {
      case 1: return load<std::uint8_t>(p);
      case 2: return load<std::uint16_t>(p);
      case 4: return load<std::uint32_t>(p);
      default: return static_cast<std::int64_t>(load<std::uint64_t>(p));
    }
  }
  switch (size) {
    case 1: return kind == 'b' ? load<std::uint8_t>(p) : load<std::int8_t>(p);
    case 2: return load<std::int16_t>(p);
    case 4: return load<std::int32_t>(p);
    default: return load<std::int64_t>(p);
  }
}

}  // namespace

void ArrayReader::read_blocks(
    std::int64_t count, const std::function<void(const char*, std::int64_t, std::int64_t)>& take) {
  TESSERA_CHECK(count >= 0 && count <= remaining_, InvalidArgument, where_, ": asked for ",
                count, " elements, ", remaining_, " remain");
  std::vector<char> block;
  const std::int64_t per_block = static_cast<std::int64_t>(kBlockBytes) / info_.item_size;
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t n = std::min(count - done, per_block);
    block.resize(static_cast<std::size_t>(n * info_.item_size));
    remaining_ -= n;
    next_bytes(block.data(), block.size());
    take(block.data(), n, done);
    done += n;
  }
}

void ArrayReader::read_int64(std::int64_t* out, std::int64_t count) {
  TESSERA_CHECK(info_.kind != 'f', InvalidInput, where_, ": dtype '", info_.descr,
                "' holds floats; expected integers");
  const std::int64_t first = info_.count() - remaining_;
  read_blocks(count, [&](const char* bytes, std::int64_t n, std::int64_t at) {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t value = integer_at(bytes + i * info_.item_size, info_.kind,
                                            info_.item_size);
      TESSERA_CHECK(info_.kind != 'u' || info_.item_size < 8 || value >= 0, InvalidInput,
                    where_, ": element ", first + at + i, " does not fit int64");
      out[at + i] = value;
    }
  });
}

void ArrayReader::read_f64(double* out, std::int64_t count) {
  read_blocks(count, [&](const char* bytes, std::int64_t n, std::int64_t at) {
    const char* p = bytes;
    for (std::int64_t i = 0; i < n; ++i, p += info_.item_size) {
      if (info_.kind == 'f') {
        out[at + i] = info_.item_size == 4 ? load<float>(p) : load<double>(p);
      } else if (info_.kind == 'u' && info_.item_size == 8) {
        out[at + i] = static_cast<double>(load<std::uint64_t>(p));
      } else {
        out[at + i] = static_cast<double>(integer_at(p, info_.kind, info_.item_size));
      }
    }
  });
}

void ArrayReader::read_f32(float* out, std::int64_t count) {
  TESSERA_CHECK(info_.kind == 'f', InvalidInput, where_, ": dtype '", info_.descr,
                "' holds integers; expected floats");
  if (info_.item_size == 4) {
    TESSERA_CHECK(count >= 0 && count <= remaining_, InvalidArgument, where_, ": asked for ",
                  count, " elements, ", remaining_, " remain");
    remaining_ -= count;
    next_bytes(reinterpret_cast<char*>(out), static_cast<std::size_t>(count) * 4);
    return;
  }
  read_blocks(count, [&](const char* bytes, std::int64_t n, std::int64_t at) {
    for (std::int64_t i = 0; i < n; ++i) {
      out[at + i] = static_cast<float>(load<double>(bytes + 8 * i));
    }
  });
}

}  // namespace tessera::npz
