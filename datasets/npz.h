// SPDX-License-Identifier: Apache-2.0
// NumPy's .npz archives (a zip of .npy arrays, as np.savez and np.savez_compressed write them) read
// as streams: an array's elements arrive in C order, a block at a time, converted to int64, f32
// or f64, so that an array larger than memory can be copied through bounded buffers. The zip
// container (zip64 and deflate included) is libzip's; the .npy header (format versions 1-3) is
// parsed here. Every error names "<archive>:<member>" and the problem.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessera::npz {

// An .npy array's description: descr "<f4", its kind ('f' float, 'i' signed, 'u' unsigned,
// 'b' bool), item size in bytes, and the shape (C order; fortran_order arrays are refused).
struct ArrayInfo {
  std::string descr;
  char kind = 'f';
  int item_size = 4;
  std::vector<std::int64_t> shape;
  std::int64_t count() const;  // product of the shape (1 for a 0-d array)
};

// Parses the start of an .npy file: the magic, version and header dict; `bytes` holds at least
// the header. Returns the info and sets *data_offset to where the elements begin. `where` names
// the array in errors.
ArrayInfo parse_header(const std::string& bytes, const std::string& where,
                       std::size_t* data_offset);

class Archive;

// One array of an archive, read front to back.
class ArrayReader {
 public:
  ArrayReader(ArrayReader&&) noexcept;
  ArrayReader& operator=(ArrayReader&&) noexcept;
  ~ArrayReader();

  const ArrayInfo& info() const { return info_; }
  const std::string& where() const { return where_; }
  std::int64_t remaining() const { return remaining_; }

  // The next `count` elements (count <= remaining()), converted: integers (and bools) to int64;
  // floats to f32 / f64 (f32 exactly, f64 to f32 rounded). Floats to integers and integers to
  // f32 are refused; read_f64 takes both (integers exact below 2^53). After the last element the
  // member must end (nothing follows, and libzip's CRC check passes).
  void read_int64(std::int64_t* out, std::int64_t count);
  void read_f32(float* out, std::int64_t count);
  void read_f64(double* out, std::int64_t count);

 private:
  friend class Archive;
  struct File;
  ArrayReader(std::unique_ptr<File> file, ArrayInfo info, std::string where,
              std::string pending);
  // Fills `bytes` with the next `n` bytes of element data (remaining_ already counts them out).
  void next_bytes(char* bytes, std::size_t n);
  void finish();
  // The next `count` elements a block at a time: take(bytes, n, elements taken before).
  void read_blocks(std::int64_t count,
                   const std::function<void(const char*, std::int64_t, std::int64_t)>& take);

  std::unique_ptr<File> file_;
  ArrayInfo info_;
  std::string where_;
  std::string pending_;  // element bytes read with the header
  std::size_t pending_at_ = 0;
  std::int64_t remaining_ = 0;
};

// An .npz file opened for reading.
class Archive {
 public:
  explicit Archive(const std::filesystem::path& file);  // Io / InvalidInput naming the file
  Archive(Archive&&) noexcept;
  Archive& operator=(Archive&&) noexcept;
  ~Archive();

  // Array names (members without their ".npy"), in archive order.
  std::vector<std::string> names() const;
  bool has(const std::string& name) const;
  // Opens `name`; InvalidInput naming the archive and the arrays it holds when absent.
  ArrayReader open(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  struct Zip;
  std::unique_ptr<Zip> zip_;
  std::string path_;
};

}  // namespace tessera::npz
