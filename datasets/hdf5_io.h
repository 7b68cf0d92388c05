// SPDX-License-Identifier: Apache-2.0
// Thin RAII layer over the HDF5 C API shared by every Tessera file format (datasets, partition
// stores, checkpoints): handles, checked calls that turn HDF5's error stack into a
// tessera::Error naming the file and the path inside it, and a writer and a reader of
// attributes and 1-D / 2-D arrays that work on a file or on an in-memory file image.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace tessera {
class ProgressBar;
}

namespace tessera::hdf5 {

// The outermost and innermost descriptions on HDF5's error stack (one line); clears the stack.
std::string error_text();
// Switches off HDF5's own printing of errors (Tessera reports them).
void silence();

// Owns one hid_t and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  Handle& operator=(Handle&& other) noexcept {
    std::swap(id_, other.id_);
    std::swap(close_, other.close_);
    return *this;
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  hid_t release() { return std::exchange(id_, -1); }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// Element type of a stored array: what read checks and what messages print.
struct ElementType {
  H5T_class_t type_class;
  std::size_t size;
  H5T_sign_t sign;  // integers only
  const char* name;
};
inline constexpr ElementType kInt64{H5T_INTEGER, 8, H5T_SGN_2, "int64"};
inline constexpr ElementType kInt32{H5T_INTEGER, 4, H5T_SGN_2, "int32"};
inline constexpr ElementType kFloat32{H5T_FLOAT, 4, H5T_SGN_ERROR, "float32"};

std::string describe_type(hid_t type);

// Writes a new file (truncating), or an in-memory image when constructed without a path.
class Writer {
 public:
  Writer(const std::filesystem::path& path, const std::string& label);
  explicit Writer(const std::string& label);  // in memory; take the bytes with image()

  void group(const char* path);
  // A dataset of shape (rows) (ndims 1) or (rows, cols) (ndims 2); `chunked` splits it into
  // chunks of about 4 MiB of rows (large feature matrices).
  void array(const char* path, const ElementType& type, const void* data, std::int64_t rows,
             std::int64_t cols, int ndims, bool chunked);
  // Arrays written a block of rows at a time: create_array makes an empty (chunked) dataset of
  // shape (rows) or (rows, cols); an extendible one grows as write_rows writes past its end
  // (its final length unknown when it is created). write_rows writes rows
  // [first_row, first_row + rows) from `data`; read_rows reads rows back from the file being
  // written.
  void create_array(const char* path, const ElementType& type, std::int64_t rows,
                    std::int64_t cols, int ndims, bool extendible);
  void write_rows(const char* path, const ElementType& type, const void* data,
                  std::int64_t first_row, std::int64_t rows, std::int64_t cols);
  void read_rows(const char* path, const ElementType& type, void* buffer, std::int64_t first_row,
                 std::int64_t rows, std::int64_t cols);
  void attribute(const char* name, const std::string& value);
  void attribute(const char* name, std::int64_t value);
  void attribute(const char* name, std::uint64_t value);
  // From now on every non-empty array is chunked and carries a Fletcher-32 checksum per chunk,
  // so that a corrupted byte fails the read instead of returning wrong numbers.
  void enable_checksums() { checksums_ = true; }
  // Flushes and closes a file.
  void close();
  // Flushes and returns the in-memory file's bytes (memory writers only); closes it.
  std::vector<std::byte> image();

 private:
  void write_attribute(const char* name, hid_t file_type, hid_t memory_type, const void* value);

  std::string label_;
  std::uint64_t done_ = 0;
  bool checksums_ = false;
  Handle file_;
};



// Reads a file, or an in-memory image (the bytes must outlive the reader).
class Reader {
 public:
  Reader(const std::filesystem::path& path, const std::string& label);
  Reader(std::span<const std::byte> image, const std::string& label);
  ~Reader();

  // A progress bar on stderr over `total` bytes of array reads (no-op when disabled).
  void start_progress(std::uint64_t total, bool enabled);
  void finish_progress();

  bool has_attribute(const char* name);
  // Whether a dataset (or group) named `path` exists ("/name": directly under the root).
  bool has_dataset(const char* path);
  std::string string_attribute(const char* name);
  std::int64_t int64_attribute(const char* name);
  std::uint64_t uint64_attribute(const char* name);

  // Shape of the array at `path` after checking it exists, has `ndims` dimensions and the
  // element type `type`; the second entry is 1 for 1-D arrays.
  std::pair<std::int64_t, std::int64_t> shape(const char* path, const ElementType& type,
                                              int ndims);
  // Reads an array whose shape was checked by shape() into `buffer`.
  void read(const char* path, const ElementType& type, void* buffer, std::int64_t rows,
            std::int64_t cols);
  // Reads rows [first_row, first_row + rows) of an array whose shape was checked by shape(): a
  // slice of a large array without reading the rest.
  void read_rows(const char* path, const ElementType& type, void* buffer, std::int64_t first_row,
                 std::int64_t rows, std::int64_t cols);

  // A 1-D array; expected_rows < 0 accepts any length.
  template <class T>
  std::vector<T> vector(const char* path, const ElementType& type, std::int64_t expected_rows) {
    auto [rows, cols] = shape(path, type, 1);
    TESSERA_CHECK(expected_rows < 0 || rows == expected_rows, InvalidInput, where(path),
                  ": expected ", expected_rows, " entries, found ", rows);
    std::vector<T> values(static_cast<std::size_t>(rows));
    read(path, type, values.data(), rows, cols);
    return values;
  }
  // An (expected_rows, cols) f32 matrix; (0, 0) is accepted too (no features).
  Tensor matrix(const char* path, std::int64_t expected_rows);

  std::string where(const char* path) const { return label_ + ": " + path; }
  std::string attribute_where(const char* name) const {
    return label_ + ": attribute '" + name + "' of /";
  }

 private:
  Handle open_attribute(const char* name);
  Handle open_dataset(const char* path);
  template <class T>
  T integer_attribute(const char* name, hid_t memory_type, const char* type_name);

  std::string label_;
  std::unique_ptr<ProgressBar> progress_;
  std::uint64_t done_ = 0;
  Handle file_;
};

}  // namespace tessera::hdf5

// Evaluates an HDF5 call; a negative result throws `category` with the message parts given
// plus HDF5's own description of the failure.
#define TESSERA_H5(call, category, ...)                                                   \
  [&] {                                                                                   \
    auto h5_result = (call);                                                              \
    TESSERA_CHECK(h5_result >= 0, category, __VA_ARGS__, " (", ::tessera::hdf5::error_text(), \
                  ")");                                                                   \
    return h5_result;                                                                     \
  }()
