// SPDX-License-Identifier: Apache-2.0
// The HDF5 C API behind tessera::hdf5::Writer / Reader: arrays move in blocks of about 64 MiB
// (so a progress bar can follow), in-memory images use the core driver without a backing store.
#include "datasets/hdf5_io.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <type_traits>

#include "core/fuzzing.h"
#include "datasets/dataset.h"
#include "datasets/progress.h"

namespace tessera::hdf5 {
namespace {

// The most an array's bytes can exceed what HDF5 stores for it: deflate's limit (1032:1).
constexpr double kMaxCompression = 1032.0;

// Whether a dataset has a filter that may store it in fewer bytes than it holds (anything but
// the checksum and shuffle filters).
bool is_compressed(hid_t dataset, const std::string& where) {
  Handle create(TESSERA_H5(H5Dget_create_plist(dataset), Io, where, ": H5Dget_create_plist"),
                H5Pclose);
  const int filters = TESSERA_H5(H5Pget_nfilters(create.get()), Io, where, ": H5Pget_nfilters");
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    std::size_t values = 0;
    const H5Z_filter_t id = H5Pget_filter2(create.get(), static_cast<unsigned>(i), &flags, &values,
                                           nullptr, 0, nullptr, nullptr);
    if (id != H5Z_FILTER_FLETCHER32 && id != H5Z_FILTER_SHUFFLE) return true;
  }
  return false;
}

// Rows per HDF5 call and per feature chunk: about this many bytes.
constexpr std::int64_t kBlockBytes = 64ll << 20;
constexpr std::int64_t kChunkBytes = 4ll << 20;
// Growth step of an in-memory image.
constexpr std::size_t kImageIncrement = 8u << 20;

// The H5T_* type ids are globals set up by H5open, so they are looked up at use time.
hid_t file_type_of(const ElementType& type) {
  if (type.type_class == H5T_FLOAT) return H5T_IEEE_F32LE;
  return type.size == 8 ? H5T_STD_I64LE : H5T_STD_I32LE;
}
hid_t memory_type_of(const ElementType& type) {
  if (type.type_class == H5T_FLOAT) return H5T_NATIVE_FLOAT;
  return type.size == 8 ? H5T_NATIVE_INT64 : H5T_NATIVE_INT32;
}

// Reads or writes rows [first_row, first_row + rows) of a 1-D or 2-D dataset, from or into
// `buffer` (which holds those rows), in blocks of about kBlockBytes; `done` counts the bytes
// moved for the progress bar (which may be null).
void transfer_rows(hid_t dataset, const ElementType& type, void* buffer, std::int64_t rows,
                   std::int64_t cols, bool write, ProgressBar* progress, std::uint64_t& done,
                   const std::string& where, std::int64_t first_row = 0) {
  const std::int64_t row_bytes = std::max<std::int64_t>(1, cols) * type.size;
  if (rows == 0 || cols == 0) return;
  const std::int64_t block = std::max<std::int64_t>(1, kBlockBytes / row_bytes);
  Handle file_space(TESSERA_H5(H5Dget_space(dataset), Io, where, ": cannot get dataspace"),
                    H5Sclose);
  const int ndims = TESSERA_H5(H5Sget_simple_extent_ndims(file_space.get()), Io, where,
                               ": cannot get dataspace rank");
  Handle transfer(TESSERA_H5(H5Pcreate(H5P_DATASET_XFER), Io, where, ": H5Pcreate"), H5Pclose);
  if (!kVerifyChecksums) {
    TESSERA_H5(H5Pset_edc_check(transfer.get(), H5Z_DISABLE_EDC), Io, where, ": H5Pset_edc_check");
  }
  for (std::int64_t begin = 0; begin < rows; begin += block) {
    const std::int64_t count = std::min(block, rows - begin);
    hsize_t start[2] = {static_cast<hsize_t>(first_row + begin), 0};
    hsize_t extent[2] = {static_cast<hsize_t>(count), static_cast<hsize_t>(cols)};
    TESSERA_H5(
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, extent, nullptr), Io,
        where, ": cannot select rows ", first_row + begin, "..", first_row + begin + count);
    Handle memory_space(
        TESSERA_H5(H5Screate_simple(ndims, extent, nullptr), Io, where, ": cannot create memspace"),
        H5Sclose);
    char* block_data = static_cast<char*>(buffer) + begin * row_bytes;
    if (write) {
      TESSERA_H5(H5Dwrite(dataset, memory_type_of(type), memory_space.get(), file_space.get(),
                          H5P_DEFAULT, block_data),
                 Io, where, ": cannot write rows ", first_row + begin, "..",
                 first_row + begin + count);
    } else {
      TESSERA_H5(H5Dread(dataset, memory_type_of(type), memory_space.get(), file_space.get(),
                         transfer.get(), block_data),
                 Io, where, ": cannot read rows ", first_row + begin, "..",
                 first_row + begin + count);
    }
    done += static_cast<std::uint64_t>(count * row_bytes);
    if (progress) progress->update(done);
  }
}

// File-access properties for writing: the HDF5 1.10 file format, whose superblock and object
// headers carry checksums, so corrupted metadata fails to open instead of reading as other
// attributes or an unallocated (zero) array. Files need HDF5 >= 1.10 to be read.
Handle write_access(const std::string& label) {
  Handle access(TESSERA_H5(H5Pcreate(H5P_FILE_ACCESS), Io, label, ": H5Pcreate"), H5Pclose);
  TESSERA_H5(H5Pset_libver_bounds(access.get(), H5F_LIBVER_V110, H5F_LIBVER_LATEST), Io, label,
             ": cannot select the HDF5 1.10 file format");
  return access;
}

// File-access properties of an in-memory file (core driver, nothing written to disk). Images
// keep HDF5's default format: a 1.10-format image taken before the file is closed does not
// pass its own superblock checksum, and an image only travels between ranks of one job.
Handle memory_access(const std::string& label) {
  Handle access(TESSERA_H5(H5Pcreate(H5P_FILE_ACCESS), Io, label, ": H5Pcreate"), H5Pclose);
  TESSERA_H5(H5Pset_fapl_core(access.get(), kImageIncrement, /*backing_store=*/0), Io, label,
             ": cannot select the in-memory driver");
  return access;
}

}  // namespace

std::string error_text() {
  std::vector<std::string> descriptions;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* error, void* out) -> herr_t {
        if (error->desc && *error->desc) {
          static_cast<std::vector<std::string>*>(out)->emplace_back(error->desc);
        }
        return 0;
      },
      &descriptions);
  H5Eclear2(H5E_DEFAULT);
  if (descriptions.empty()) return "no detail from HDF5";
  std::string text = "HDF5: " + descriptions.front();
  if (descriptions.size() > 1) text += "; " + descriptions.back();
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

void silence() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string describe_type(hid_t type) {
  std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(8 * size);
    case H5T_FLOAT:
      return "float" + std::to_string(8 * size);
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    default:
      return "a non-numeric type";
  }
}

// ---------------------------------------------------------------------------------------------
// Writer

Writer::Writer(const std::filesystem::path& path, const std::string& label) : label_(label) {
  silence();
  Handle access = write_access(path.string());
  file_ = Handle(TESSERA_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), Io,
                            path.string(), ": cannot create HDF5 file"),
                 H5Fclose);
}

Writer::Writer(const std::string& label) : label_(label) {
  silence();
  Handle access = memory_access(label);
  file_ = Handle(TESSERA_H5(H5Fcreate(label.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()),
                            Io, label, ": cannot create in-memory HDF5 file"),
                 H5Fclose);
}

void Writer::group(const char* path) {
  Handle(TESSERA_H5(H5Gcreate2(file_.get(), path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), Io,
                    label_, ": ", path, ": cannot create group"),
         H5Gclose);
}

void Writer::array(const char* path, const ElementType& type, const void* data, std::int64_t rows,
                   std::int64_t cols, int ndims, bool chunked) {
  const std::string where = label_ + ": " + path;
  hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
  Handle space(
      TESSERA_H5(H5Screate_simple(ndims, dims, nullptr), Io, where, ": cannot create dataspace"),
      H5Sclose);
  Handle create(TESSERA_H5(H5Pcreate(H5P_DATASET_CREATE), Io, where, ": H5Pcreate"), H5Pclose);
  if ((chunked || checksums_) && rows > 0 && cols > 0) {
    const std::int64_t row_bytes = (ndims == 2 ? cols : 1) * static_cast<std::int64_t>(type.size);
    hsize_t chunk[2] = {
        static_cast<hsize_t>(std::clamp<std::int64_t>(kChunkBytes / row_bytes, 1, rows)),
        static_cast<hsize_t>(cols)};
    TESSERA_H5(H5Pset_chunk(create.get(), ndims, chunk), Io, where, ": cannot set chunking");
    if (checksums_) {
      TESSERA_H5(H5Pset_fletcher32(create.get()), Io, where, ": cannot enable checksums");
    }
  }
  Handle dataset(TESSERA_H5(H5Dcreate2(file_.get(), path, file_type_of(type), space.get(),
                                       H5P_DEFAULT, create.get(), H5P_DEFAULT),
                            Io, where, ": cannot create dataset"),
                 H5Dclose);
  transfer_rows(dataset.get(), type, const_cast<void*>(data), rows, ndims == 2 ? cols : 1, true,
                nullptr, done_, where);
}

void Writer::create_array(const char* path, const ElementType& type, std::int64_t rows,
                          std::int64_t cols, int ndims, bool extendible) {
  const std::string where = label_ + ": " + path;
  hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
  hsize_t max_dims[2] = {extendible ? H5S_UNLIMITED : dims[0], dims[1]};
  Handle space(TESSERA_H5(H5Screate_simple(ndims, dims, max_dims), Io, where,
                          ": cannot create dataspace"),
               H5Sclose);
  Handle create(TESSERA_H5(H5Pcreate(H5P_DATASET_CREATE), Io, where, ": H5Pcreate"), H5Pclose);
  const std::int64_t row_bytes = (ndims == 2 ? cols : 1) * static_cast<std::int64_t>(type.size);
  if (row_bytes > 0 && (extendible || rows > 0)) {
    const std::int64_t chunk_rows = std::max<std::int64_t>(1, kChunkBytes / row_bytes);
    hsize_t chunk[2] = {
        static_cast<hsize_t>(extendible ? chunk_rows : std::min(chunk_rows, rows)),
        static_cast<hsize_t>(std::max<std::int64_t>(cols, 1))};
    TESSERA_H5(H5Pset_chunk(create.get(), ndims, chunk), Io, where, ": cannot set chunking");
    if (checksums_) {
      TESSERA_H5(H5Pset_fletcher32(create.get()), Io, where, ": cannot enable checksums");
    }
  }
  Handle(TESSERA_H5(H5Dcreate2(file_.get(), path, file_type_of(type), space.get(), H5P_DEFAULT,
                               create.get(), H5P_DEFAULT),
                    Io, where, ": cannot create dataset"),
         H5Dclose);
}

void Writer::write_rows(const char* path, const ElementType& type, const void* data,
                        std::int64_t first_row, std::int64_t rows, std::int64_t cols) {
  const std::string where = label_ + ": " + path;
  Handle dataset(TESSERA_H5(H5Dopen2(file_.get(), path, H5P_DEFAULT), Io, where,
                            ": cannot open dataset"),
                 H5Dclose);
  Handle space(TESSERA_H5(H5Dget_space(dataset.get()), Io, where, ": cannot get dataspace"),
               H5Sclose);
  hsize_t dims[2] = {0, 0};
  const int ndims = TESSERA_H5(H5Sget_simple_extent_dims(space.get(), dims, nullptr), Io, where,
                               ": cannot get the extent");
  if (static_cast<hsize_t>(first_row + rows) > dims[0]) {  // an extendible array grows
    dims[0] = static_cast<hsize_t>(first_row + rows);
    TESSERA_H5(H5Dset_extent(dataset.get(), dims), Io, where, ": cannot extend to ", dims[0],
               " rows");
  }
  transfer_rows(dataset.get(), type, const_cast<void*>(data), rows, ndims == 2 ? cols : 1, true,
                nullptr, done_, where, first_row);
}

void Writer::read_rows(const char* path, const ElementType& type, void* buffer,
                       std::int64_t first_row, std::int64_t rows, std::int64_t cols) {
  const std::string where = label_ + ": " + path;
  Handle dataset(TESSERA_H5(H5Dopen2(file_.get(), path, H5P_DEFAULT), Io, where,
                            ": cannot open dataset"),
                 H5Dclose);
  transfer_rows(dataset.get(), type, buffer, rows, std::max<std::int64_t>(cols, 1), false,
                nullptr, done_, where, first_row);
}

void Writer::attribute(const char* name, const std::string& value) {
  Handle type(TESSERA_H5(H5Tcopy(H5T_C_S1), Io, label_, ": H5Tcopy"), H5Tclose);
  TESSERA_H5(H5Tset_size(type.get(), value.size() + 1), Io, label_, ": H5Tset_size");
  TESSERA_H5(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), Io, label_, ": H5Tset_strpad");
  write_attribute(name, type.get(), type.get(), value.c_str());
}
void Writer::attribute(const char* name, std::int64_t value) {
  write_attribute(name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}
void Writer::attribute(const char* name, std::uint64_t value) {
  write_attribute(name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
}

void Writer::close() {
  TESSERA_H5(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), Io, label_, ": cannot flush");
  TESSERA_H5(H5Fclose(file_.release()), Io, label_, ": cannot close");
}

std::vector<std::byte> Writer::image() {
  TESSERA_H5(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), Io, label_, ": cannot flush");
  const ssize_t size =
      TESSERA_H5(H5Fget_file_image(file_.get(), nullptr, 0), Io, label_, ": image size");
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  TESSERA_H5(H5Fget_file_image(file_.get(), bytes.data(), bytes.size()), Io, label_,
             ": cannot copy the file image");
  TESSERA_H5(H5Fclose(file_.release()), Io, label_, ": cannot close");
  return bytes;
}

void Writer::write_attribute(const char* name, hid_t file_type, hid_t memory_type,
                             const void* value) {
  Handle space(TESSERA_H5(H5Screate(H5S_SCALAR), Io, label_, ": H5Screate"), H5Sclose);
  Handle attr(
      TESSERA_H5(H5Acreate2(file_.get(), name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 Io, label_, ": cannot create attribute '", name, "'"),
      H5Aclose);
  TESSERA_H5(H5Awrite(attr.get(), memory_type, value), Io, label_, ": cannot write attribute '",
             name, "'");
}

// ---------------------------------------------------------------------------------------------
// Reader

Reader::Reader(const std::filesystem::path& path, const std::string& label) : label_(label) {
  silence();
  std::error_code ec;
  TESSERA_CHECK(std::filesystem::exists(path, ec), InvalidArgument, label_, ": no such file");
  TESSERA_CHECK(!std::filesystem::is_directory(path, ec), Io, label_,
                ": is a directory, expected an HDF5 file");
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  TESSERA_CHECK(is_hdf5 >= 0, Io, label_, ": cannot read file (", error_text(), ")");
  TESSERA_CHECK(is_hdf5 > 0, InvalidInput, label_, ": not an HDF5 file");
  file_ = Handle(TESSERA_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), Io, label_,
                            ": cannot open HDF5 file"),
                 H5Fclose);
}

Reader::Reader(std::span<const std::byte> image, const std::string& label) : label_(label) {
  silence();
  Handle access = memory_access(label);
  // HDF5 copies the image unless told otherwise; the caller keeps the bytes alive, so no copy.
  TESSERA_H5(H5Pset_file_image(access.get(), const_cast<std::byte*>(image.data()), image.size()),
             Io, label, ": cannot attach the file image");
  file_ = Handle(TESSERA_H5(H5Fopen(label.c_str(), H5F_ACC_RDONLY, access.get()), InvalidInput,
                            label, ": not a readable HDF5 image"),
                 H5Fclose);
}

Reader::~Reader() = default;

void Reader::start_progress(std::uint64_t total, bool enabled) {
  progress_ = std::make_unique<ProgressBar>("read " + label_, total, enabled);
}
void Reader::finish_progress() {
  if (progress_) progress_->finish();
}

bool Reader::has_attribute(const char* name) {
  return TESSERA_H5(H5Aexists(file_.get(), name), Io, label_, ": attribute '", name, "'") > 0;
}

bool Reader::has_dataset(const char* path) {
  return TESSERA_H5(H5Lexists(file_.get(), path, H5P_DEFAULT), Io, where(path), ": H5Lexists") > 0;
}

std::string Reader::string_attribute(const char* name) {
  Handle attr = open_attribute(name);
  Handle type(TESSERA_H5(H5Aget_type(attr.get()), Io, attribute_where(name), ": H5Aget_type"),
              H5Tclose);
  TESSERA_CHECK(H5Tget_class(type.get()) == H5T_STRING, InvalidInput, attribute_where(name),
                ": expected a string, found ", describe_type(type.get()));
  if (TESSERA_H5(H5Tis_variable_str(type.get()), Io, attribute_where(name),
                 ": H5Tis_variable_str")) {
    Handle memory_type(TESSERA_H5(H5Tcopy(H5T_C_S1), Io, label_, ": H5Tcopy"), H5Tclose);
    TESSERA_H5(H5Tset_size(memory_type.get(), H5T_VARIABLE), Io, label_, ": H5Tset_size");
    char* text = nullptr;
    TESSERA_H5(H5Aread(attr.get(), memory_type.get(), &text), Io, attribute_where(name),
               ": cannot read");
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  std::vector<char> text(H5Tget_size(type.get()) + 1, '\0');
  TESSERA_H5(H5Aread(attr.get(), type.get(), text.data()), Io, attribute_where(name),
             ": cannot read");
  return std::string(text.data(), strnlen(text.data(), text.size()));
}

template <class T>
T Reader::integer_attribute(const char* name, hid_t memory_type, const char* type_name) {
  Handle attr = open_attribute(name);
  Handle type(TESSERA_H5(H5Aget_type(attr.get()), Io, attribute_where(name), ": H5Aget_type"),
              H5Tclose);
  TESSERA_CHECK(H5Tget_class(type.get()) == H5T_INTEGER, InvalidInput, attribute_where(name),
                ": expected an integer, found ", describe_type(type.get()));
  T value{};
  TESSERA_H5(H5Aread(attr.get(), memory_type, &value), InvalidInput, attribute_where(name),
             ": cannot read as ", type_name);
  return value;
}

std::int64_t Reader::int64_attribute(const char* name) {
  return integer_attribute<std::int64_t>(name, H5T_NATIVE_INT64, "int64");
}
std::uint64_t Reader::uint64_attribute(const char* name) {
  return integer_attribute<std::uint64_t>(name, H5T_NATIVE_UINT64, "uint64");
}

std::pair<std::int64_t, std::int64_t> Reader::shape(const char* path, const ElementType& type,
                                                    int ndims) {
  Handle dataset = open_dataset(path);
  Handle file_type(TESSERA_H5(H5Dget_type(dataset.get()), Io, where(path), ": H5Dget_type"),
                   H5Tclose);
  Handle space(TESSERA_H5(H5Dget_space(dataset.get()), Io, where(path), ": H5Dget_space"),
               H5Sclose);
  const int found_ndims =
      TESSERA_H5(H5Sget_simple_extent_ndims(space.get()), Io, where(path), ": dataspace rank");
  hsize_t dims[H5S_MAX_RANK] = {};
  TESSERA_H5(H5Sget_simple_extent_dims(space.get(), dims, nullptr), Io, where(path),
             ": dataspace extent");
  const std::string found = describe_type(file_type.get());
  const bool type_ok = H5Tget_class(file_type.get()) == type.type_class &&
                       H5Tget_size(file_type.get()) == type.size &&
                       (type.type_class != H5T_INTEGER || H5Tget_sign(file_type.get()) == type.sign);
  TESSERA_CHECK(type_ok && found_ndims == ndims, InvalidInput, where(path), ": expected ",
                type.name, " with ", ndims, " dimension(s), found ", found, " with ", found_ndims);
  // An extent the file cannot hold (a corrupt header) is refused before anything is sized by
  // it: an uncompressed array stores at least its bytes, a compressed one at least
  // 1/kMaxCompression of them. (This also keeps HDF5 1.10 from copying past a compact
  // dataset's buffer when its stored size disagrees with its extent.)
  const double declared = static_cast<double>(dims[0]) *
                          static_cast<double>(ndims == 2 ? dims[1] : 1) *
                          static_cast<double>(type.size);
  const auto stored = static_cast<double>(H5Dget_storage_size(dataset.get()));
  const double ratio = is_compressed(dataset.get(), where(path)) ? kMaxCompression : 1.0;
  TESSERA_CHECK(declared <= ratio * stored, InvalidInput, where(path), ": declares ", dims[0],
                ndims == 2 ? " x " + std::to_string(dims[1]) : std::string(), " entries (",
                declared, " bytes) but stores ", stored,
                " bytes: the file is corrupt or truncated");
  return {static_cast<std::int64_t>(dims[0]), ndims == 2 ? static_cast<std::int64_t>(dims[1]) : 1};
}

void Reader::read(const char* path, const ElementType& type, void* buffer, std::int64_t rows,
                  std::int64_t cols) {
  Handle dataset = open_dataset(path);
  transfer_rows(dataset.get(), type, buffer, rows, cols, false, progress_.get(), done_,
                where(path));
}

void Reader::read_rows(const char* path, const ElementType& type, void* buffer,
                       std::int64_t first_row, std::int64_t rows, std::int64_t cols) {
  Handle dataset = open_dataset(path);
  transfer_rows(dataset.get(), type, buffer, rows, cols, false, progress_.get(), done_,
                where(path), first_row);
}

Tensor Reader::matrix(const char* path, std::int64_t expected_rows) {
  auto [rows, cols] = shape(path, kFloat32, 2);
  TESSERA_CHECK(rows == expected_rows || (rows == 0 && cols == 0), InvalidInput, where(path),
                ": expected ", expected_rows, " rows, found ", rows);
  TESSERA_CHECK(cols >= 0 && cols <= kMaxFeatures, InvalidInput, where(path), ": ", cols,
                " columns is not a plausible width (corrupt file?)");
  Tensor values(rows, cols);
  read(path, kFloat32, values.empty() ? nullptr : values.raw(), rows, cols);
  return values;
}

Handle Reader::open_attribute(const char* name) {
  TESSERA_CHECK(has_attribute(name), InvalidInput, label_, ": missing attribute '", name,
                "' of /");
  return Handle(TESSERA_H5(H5Aopen(file_.get(), name, H5P_DEFAULT), Io, label_,
                           ": cannot open attribute '", name, "'"),
                H5Aclose);
}

Handle Reader::open_dataset(const char* path) {
  // Check each component so that a missing group reads as a missing dataset.
  std::string prefix;
  for (const char* p = path + 1;; ++p) {
    if (*p == '/' || *p == '\0') {
      prefix.assign(path, p);
      const htri_t exists = TESSERA_H5(H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT), Io,
                                       where(path), ": cannot look up ", prefix);
      TESSERA_CHECK(exists > 0, InvalidInput, where(path), ": missing dataset");
      if (*p == '\0') break;
    }
  }
  return Handle(TESSERA_H5(H5Dopen2(file_.get(), path, H5P_DEFAULT), InvalidInput, where(path),
                           ": cannot open dataset"),
                H5Dclose);
}

}  // namespace tessera::hdf5
