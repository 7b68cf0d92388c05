// Tessera's HDF5 dataset format (write_hdf5 / read_hdf5) through the HDF5 C API: one file with
// /graph/indptr, /graph/indices, /features, /labels or /targets, /split/{train,valid,test} and
// the dataset's flags as attributes of "/". Every HDF5 call goes through TESSERA_H5, which turns
// HDF5's error stack into a tessera::Error naming the file and the path inside it; HDF5's own
// printing is switched off. Files are written to "<file>.tmp" and renamed into place.
#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "datasets/loaders.h"
#include "datasets/progress.h"
#include "engine/core/error.h"

namespace tessera {
namespace {

constexpr const char* kFormatName = "tessera-dataset";
constexpr std::int64_t kFormatVersion = 1;
// Rows per HDF5 call and per feature chunk: about this many bytes.
constexpr std::int64_t kBlockBytes = 64ll << 20;
constexpr std::int64_t kChunkBytes = 4ll << 20;

// The outermost and innermost descriptions on HDF5's error stack (one line), then the stack
// is cleared.
std::string hdf5_error_text() {
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

// Evaluates an HDF5 call; a negative result throws `category` with the message parts given
// plus HDF5's own description of the failure.
#define TESSERA_H5(call, category, ...)                                                 \
  [&] {                                                                                 \
    auto h5_result = (call);                                                            \
    TESSERA_CHECK(h5_result >= 0, category, __VA_ARGS__, " (", hdf5_error_text(), ")"); \
    return h5_result;                                                                   \
  }()

// Owns one hid_t and closes it with the matching H5?close.
class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  H5Handle(H5Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  H5Handle& operator=(H5Handle&& other) noexcept {
    std::swap(id_, other.id_);
    std::swap(close_, other.close_);
    return *this;
  }
  ~H5Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  hid_t release() { return std::exchange(id_, -1); }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

std::string hex(std::uint64_t value) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

void silence_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

const char* task_name(TaskType task) {
  return task == TaskType::MultiClass ? "multiclass" : "multilabel";
}

// Element type of a stored dataset: what read checks and what messages print.
struct ElementType {
  H5T_class_t type_class;
  std::size_t size;
  H5T_sign_t sign;  // integers only
  const char* name;
};
constexpr ElementType kInt64{H5T_INTEGER, 8, H5T_SGN_2, "int64"};
constexpr ElementType kInt32{H5T_INTEGER, 4, H5T_SGN_2, "int32"};
constexpr ElementType kFloat32{H5T_FLOAT, 4, H5T_SGN_ERROR, "float32"};

// The H5T_* type ids are globals set up by H5open, so they are looked up at use time.
hid_t file_type_of(const ElementType& type) {
  if (type.type_class == H5T_FLOAT) return H5T_IEEE_F32LE;
  return type.size == 8 ? H5T_STD_I64LE : H5T_STD_I32LE;
}
hid_t memory_type_of(const ElementType& type) {
  if (type.type_class == H5T_FLOAT) return H5T_NATIVE_FLOAT;
  return type.size == 8 ? H5T_NATIVE_INT64 : H5T_NATIVE_INT32;
}

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

// Reads or writes rows [0, rows) of a 1-D or 2-D dataset in blocks of about kBlockBytes;
// `done` counts the bytes moved for the progress bar (which may be null).
void transfer_rows(hid_t dataset, const ElementType& type, void* buffer, std::int64_t rows,
                   std::int64_t cols, bool write, ProgressBar* progress, std::uint64_t& done,
                   const std::string& where) {
  const std::int64_t row_bytes = std::max<std::int64_t>(1, cols) * type.size;
  if (rows == 0 || cols == 0) return;
  const std::int64_t block = std::max<std::int64_t>(1, kBlockBytes / row_bytes);
  H5Handle file_space(TESSERA_H5(H5Dget_space(dataset), Io, where, ": cannot get dataspace"),
                      H5Sclose);
  const int ndims = TESSERA_H5(H5Sget_simple_extent_ndims(file_space.get()), Io, where,
                               ": cannot get dataspace rank");
  for (std::int64_t begin = 0; begin < rows; begin += block) {
    const std::int64_t count = std::min(block, rows - begin);
    hsize_t start[2] = {static_cast<hsize_t>(begin), 0};
    hsize_t extent[2] = {static_cast<hsize_t>(count), static_cast<hsize_t>(cols)};
    TESSERA_H5(
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, extent, nullptr), Io,
        where, ": cannot select rows ", begin, "..", begin + count);
    H5Handle memory_space(
        TESSERA_H5(H5Screate_simple(ndims, extent, nullptr), Io, where, ": cannot create memspace"),
        H5Sclose);
    char* block_data = static_cast<char*>(buffer) + begin * row_bytes;
    if (write) {
      TESSERA_H5(H5Dwrite(dataset, memory_type_of(type), memory_space.get(), file_space.get(),
                          H5P_DEFAULT, block_data),
                 Io, where, ": cannot write rows ", begin, "..", begin + count);
    } else {
      TESSERA_H5(H5Dread(dataset, memory_type_of(type), memory_space.get(), file_space.get(),
                         H5P_DEFAULT, block_data),
                 Io, where, ": cannot read rows ", begin, "..", begin + count);
    }
    done += static_cast<std::uint64_t>(count * row_bytes);
    if (progress) progress->update(done);
  }
}

// ---------------------------------------------------------------------------------------------
// Writing

class Hdf5Writer {
 public:
  Hdf5Writer(const std::filesystem::path& path, const std::string& label) : label_(label) {
    file_ = H5Handle(TESSERA_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                                Io, path.string(), ": cannot create HDF5 file"),
                     H5Fclose);
  }

  void group(const char* path) {
    H5Handle(TESSERA_H5(H5Gcreate2(file_.get(), path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), Io,
                        label_, ": ", path, ": cannot create group"),
             H5Gclose);
  }

  // A dataset of shape (rows) or (rows, cols); features are chunked by rows.
  void array(const char* path, const ElementType& type, const void* data, std::int64_t rows,
             std::int64_t cols, int ndims, bool chunked) {
    const std::string where = label_ + ": " + path;
    hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
    H5Handle space(
        TESSERA_H5(H5Screate_simple(ndims, dims, nullptr), Io, where, ": cannot create dataspace"),
        H5Sclose);
    H5Handle create(TESSERA_H5(H5Pcreate(H5P_DATASET_CREATE), Io, where, ": H5Pcreate"), H5Pclose);
    if (chunked && rows > 0 && cols > 0) {
      const std::int64_t row_bytes = cols * static_cast<std::int64_t>(type.size);
      hsize_t chunk[2] = {
          static_cast<hsize_t>(std::clamp<std::int64_t>(kChunkBytes / row_bytes, 1, rows)),
          static_cast<hsize_t>(cols)};
      TESSERA_H5(H5Pset_chunk(create.get(), ndims, chunk), Io, where, ": cannot set chunking");
    }
    H5Handle dataset(TESSERA_H5(H5Dcreate2(file_.get(), path, file_type_of(type), space.get(),
                                           H5P_DEFAULT, create.get(), H5P_DEFAULT),
                                Io, where, ": cannot create dataset"),
                     H5Dclose);
    transfer_rows(dataset.get(), type, const_cast<void*>(data), rows, ndims == 2 ? cols : 1, true,
                  nullptr, done_, where);
  }

  void attribute(const char* name, const std::string& value) {
    H5Handle type(TESSERA_H5(H5Tcopy(H5T_C_S1), Io, label_, ": H5Tcopy"), H5Tclose);
    TESSERA_H5(H5Tset_size(type.get(), value.size() + 1), Io, label_, ": H5Tset_size");
    TESSERA_H5(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), Io, label_, ": H5Tset_strpad");
    write_attribute(name, type.get(), type.get(), value.c_str());
  }
  void attribute(const char* name, std::int64_t value) {
    write_attribute(name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
  }
  void attribute(const char* name, std::uint64_t value) {
    write_attribute(name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
  }

  void close() {
    TESSERA_H5(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), Io, label_, ": cannot flush");
    TESSERA_H5(H5Fclose(file_.release()), Io, label_, ": cannot close");
  }

 private:
  void write_attribute(const char* name, hid_t file_type, hid_t memory_type, const void* value) {
    H5Handle space(TESSERA_H5(H5Screate(H5S_SCALAR), Io, label_, ": H5Screate"), H5Sclose);
    H5Handle attr(
        TESSERA_H5(H5Acreate2(file_.get(), name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                   Io, label_, ": cannot create attribute '", name, "'"),
        H5Aclose);
    TESSERA_H5(H5Awrite(attr.get(), memory_type, value), Io, label_, ": cannot write attribute '",
               name, "'");
  }

  std::string label_;
  std::uint64_t done_ = 0;
  H5Handle file_;
};

void check_writable(const Dataset& d) {
  const std::int64_t n = d.num_nodes();
  const bool no_features = d.features.rows() == 0 && d.features.cols() == 0;
  TESSERA_CHECK(no_features || (d.features.dtype() == DType::F32 && d.features.rows() == n),
                InvalidArgument, "write_hdf5: features must be f32 with ", n, " rows, got ",
                to_string(d.features.dtype()), " ", d.features.shape_string());
  if (d.task == TaskType::MultiClass) {
    TESSERA_CHECK(static_cast<std::int64_t>(d.labels.size()) == n, InvalidArgument,
                  "write_hdf5: expected ", n, " labels, got ", d.labels.size());
  } else {
    TESSERA_CHECK(d.targets.dtype() == DType::F32 && d.targets.rows() == n, InvalidArgument,
                  "write_hdf5: targets must be f32 with ", n, " rows, got ",
                  to_string(d.targets.dtype()), " ", d.targets.shape_string());
  }
}

// Layout (format "tessera-dataset", version 1). Attributes of "/": format, name, task
// ("multiclass" | "multilabel"), eval_metric (strings); format_version, num_classes, num_tasks,
// add_inverse_edge (0/1), num_edge_lines (int64); fingerprint (uint64, see dataset.h).
// Datasets: /graph/indptr int64 (N + 1), /graph/indices int32 (nnz), /features float32 (N, F)
// chunked by rows (about 4 MiB per chunk, no filter), /labels int64 (N) or /targets float32
// (N, T), /split/{train,valid,test} int64. All little-endian.
void write_contents(const Dataset& d, Hdf5Writer& out) {
  out.attribute("format", std::string(kFormatName));
  out.attribute("format_version", kFormatVersion);
  out.attribute("name", d.name);
  out.attribute("task", std::string(task_name(d.task)));
  out.attribute("eval_metric", d.eval_metric);
  out.attribute("num_classes", d.num_classes);
  out.attribute("num_tasks", d.num_tasks);
  out.attribute("add_inverse_edge", std::int64_t{d.add_inverse_edge ? 1 : 0});
  out.attribute("num_edge_lines", d.num_edge_lines);
  out.attribute("fingerprint", fingerprint(d));

  const Csr& g = d.graph;
  out.group("/graph");
  out.array("/graph/indptr", kInt64, g.indptr().data(), g.num_rows() + 1, 1, 1, false);
  out.array("/graph/indices", kInt32, g.indices().data(), g.nnz(), 1, 1, false);
  const Tensor& x = d.features;
  out.array("/features", kFloat32, x.empty() ? nullptr : x.raw(), x.rows(), x.cols(), 2, true);
  if (d.task == TaskType::MultiClass) {
    out.array("/labels", kInt64, d.labels.data(), static_cast<std::int64_t>(d.labels.size()), 1, 1,
              false);
  } else {
    const Tensor& y = d.targets;
    out.array("/targets", kFloat32, y.empty() ? nullptr : y.raw(), y.rows(), y.cols(), 2, true);
  }
  out.group("/split");
  auto split = [&](const char* path, const std::vector<GlobalId>& ids) {
    out.array(path, kInt64, ids.data(), static_cast<std::int64_t>(ids.size()), 1, 1, false);
  };
  split("/split/train", d.train_idx);
  split("/split/valid", d.valid_idx);
  split("/split/test", d.test_idx);
}

// ---------------------------------------------------------------------------------------------
// Reading

class Hdf5Reader {
 public:
  Hdf5Reader(const std::filesystem::path& path, const std::string& label) : label_(label) {
    std::error_code ec;
    TESSERA_CHECK(std::filesystem::exists(path, ec), Io, label_, ": no such file");
    TESSERA_CHECK(!std::filesystem::is_directory(path, ec), Io, label_,
                  ": is a directory, expected an HDF5 file");
    const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
    TESSERA_CHECK(is_hdf5 >= 0, Io, label_, ": cannot read file (", hdf5_error_text(), ")");
    TESSERA_CHECK(is_hdf5 > 0, InvalidInput, label_, ": not an HDF5 file");
    file_ = H5Handle(TESSERA_H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), Io, label_,
                                ": cannot open HDF5 file"),
                     H5Fclose);
  }

  void start_progress(std::uint64_t total, bool enabled) {
    progress_ = std::make_unique<ProgressBar>("read " + label_, total, enabled);
  }
  void finish_progress() {
    if (progress_) progress_->finish();
  }

  bool has_attribute(const char* name) {
    return TESSERA_H5(H5Aexists(file_.get(), name), Io, label_, ": attribute '", name, "'") > 0;
  }

  std::string string_attribute(const char* name) {
    H5Handle attr = open_attribute(name);
    H5Handle type(TESSERA_H5(H5Aget_type(attr.get()), Io, attribute_where(name), ": H5Aget_type"),
                  H5Tclose);
    TESSERA_CHECK(H5Tget_class(type.get()) == H5T_STRING, InvalidInput, attribute_where(name),
                  ": expected a string, found ", describe_type(type.get()));
    if (TESSERA_H5(H5Tis_variable_str(type.get()), Io, attribute_where(name),
                   ": H5Tis_variable_str")) {
      H5Handle memory_type(TESSERA_H5(H5Tcopy(H5T_C_S1), Io, label_, ": H5Tcopy"), H5Tclose);
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
  T integer_attribute(const char* name) {
    H5Handle attr = open_attribute(name);
    H5Handle type(TESSERA_H5(H5Aget_type(attr.get()), Io, attribute_where(name), ": H5Aget_type"),
                  H5Tclose);
    TESSERA_CHECK(H5Tget_class(type.get()) == H5T_INTEGER, InvalidInput, attribute_where(name),
                  ": expected an integer, found ", describe_type(type.get()));
    T value{};
    hid_t memory_type = std::is_signed_v<T> ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64;
    TESSERA_H5(H5Aread(attr.get(), memory_type, &value), InvalidInput, attribute_where(name),
               ": cannot read as ", std::is_signed_v<T> ? "int64" : "uint64");
    return value;
  }

  // Shape of the dataset at `path` after checking it exists, has `ndims` dimensions and the
  // element type `type`; dims[1] = 1 for 1-D.
  std::pair<std::int64_t, std::int64_t> shape(const char* path, const ElementType& type,
                                              int ndims) {
    H5Handle dataset = open_dataset(path);
    H5Handle file_type(TESSERA_H5(H5Dget_type(dataset.get()), Io, where(path), ": H5Dget_type"),
                       H5Tclose);
    H5Handle space(TESSERA_H5(H5Dget_space(dataset.get()), Io, where(path), ": H5Dget_space"),
                   H5Sclose);
    const int found_ndims =
        TESSERA_H5(H5Sget_simple_extent_ndims(space.get()), Io, where(path), ": dataspace rank");
    hsize_t dims[H5S_MAX_RANK] = {};
    TESSERA_H5(H5Sget_simple_extent_dims(space.get(), dims, nullptr), Io, where(path),
               ": dataspace extent");
    const std::string found = describe_type(file_type.get());
    const bool type_ok =
        H5Tget_class(file_type.get()) == type.type_class &&
        H5Tget_size(file_type.get()) == type.size &&
        (type.type_class != H5T_INTEGER || H5Tget_sign(file_type.get()) == type.sign);
    TESSERA_CHECK(type_ok && found_ndims == ndims, InvalidInput, where(path), ": expected ",
                  type.name, " with ", ndims, " dimension(s), found ", found, " with ",
                  found_ndims);
    return {static_cast<std::int64_t>(dims[0]),
            ndims == 2 ? static_cast<std::int64_t>(dims[1]) : 1};
  }

  // Reads a dataset whose shape was checked by shape() into `buffer`.
  void read(const char* path, const ElementType& type, void* buffer, std::int64_t rows,
            std::int64_t cols) {
    H5Handle dataset = open_dataset(path);
    transfer_rows(dataset.get(), type, buffer, rows, cols, false, progress_.get(), done_,
                  where(path));
  }

  template <class T>
  std::vector<T> vector(const char* path, const ElementType& type, std::int64_t expected_rows) {
    auto [rows, cols] = shape(path, type, 1);
    TESSERA_CHECK(expected_rows < 0 || rows == expected_rows, InvalidInput, where(path),
                  ": expected ", expected_rows, " entries, found ", rows);
    std::vector<T> values(static_cast<std::size_t>(rows));
    read(path, type, values.data(), rows, cols);
    return values;
  }

  // An (N, cols) f32 matrix; (0, 0) is accepted too (a dataset without node features).
  Tensor matrix(const char* path, std::int64_t expected_rows) {
    auto [rows, cols] = shape(path, kFloat32, 2);
    TESSERA_CHECK(rows == expected_rows || (rows == 0 && cols == 0), InvalidInput, where(path),
                  ": expected ", expected_rows, " rows, found ", rows);
    Tensor values(rows, cols);
    read(path, kFloat32, values.empty() ? nullptr : values.raw(), rows, cols);
    return values;
  }

  std::string where(const char* path) const { return label_ + ": " + path; }
  std::string attribute_where(const char* name) const {
    return label_ + ": attribute '" + name + "' of /";
  }

 private:
  H5Handle open_attribute(const char* name) {
    TESSERA_CHECK(has_attribute(name), InvalidInput, label_, ": missing attribute '", name,
                  "' of /");
    return H5Handle(TESSERA_H5(H5Aopen(file_.get(), name, H5P_DEFAULT), Io, label_,
                               ": cannot open attribute '", name, "'"),
                    H5Aclose);
  }

  H5Handle open_dataset(const char* path) {
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
    return H5Handle(TESSERA_H5(H5Dopen2(file_.get(), path, H5P_DEFAULT), InvalidInput, where(path),
                               ": cannot open dataset"),
                    H5Dclose);
  }

  std::string label_;
  std::unique_ptr<ProgressBar> progress_;
  std::uint64_t done_ = 0;
  H5Handle file_;
};

void read_flags(Hdf5Reader& in, const std::string& label, Dataset& d) {
  TESSERA_CHECK(in.has_attribute("format"), InvalidInput, label,
                ": not a Tessera dataset (no 'format' attribute on /)");
  const std::string format = in.string_attribute("format");
  TESSERA_CHECK(format == kFormatName, InvalidInput, label, ": not a Tessera dataset (format '",
                format, "', expected '", kFormatName, "')");
  const auto version = in.integer_attribute<std::int64_t>("format_version");
  TESSERA_CHECK(version == kFormatVersion, InvalidInput, label, ": format version ", version,
                " is not supported (this build reads version ", kFormatVersion, ")");
  d.name = in.string_attribute("name");
  const std::string task = in.string_attribute("task");
  TESSERA_CHECK(task == "multiclass" || task == "multilabel", InvalidInput, label,
                ": attribute 'task' is '", task, "', expected 'multiclass' or 'multilabel'");
  d.task = task == "multiclass" ? TaskType::MultiClass : TaskType::MultiLabel;
  d.eval_metric = in.string_attribute("eval_metric");
  TESSERA_CHECK(d.eval_metric == "acc" || d.eval_metric == "rocauc", InvalidInput, label,
                ": attribute 'eval_metric' is '", d.eval_metric, "', expected 'acc' or 'rocauc'");
  d.num_classes = in.integer_attribute<std::int64_t>("num_classes");
  d.num_tasks = in.integer_attribute<std::int64_t>("num_tasks");
  d.add_inverse_edge = in.integer_attribute<std::int64_t>("add_inverse_edge") != 0;
  d.num_edge_lines = in.integer_attribute<std::int64_t>("num_edge_lines");
}

}  // namespace

void write_hdf5(const Dataset& dataset, const std::filesystem::path& file) {
  silence_hdf5();
  check_writable(dataset);
  const std::filesystem::path temporary = file.string() + ".tmp";
  try {
    if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
    Hdf5Writer out(temporary, file.string());
    write_contents(dataset, out);
    out.close();
    std::filesystem::rename(temporary, file);
  } catch (const std::filesystem::filesystem_error& error) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    TESSERA_FAIL(Io, file.string(), ": ", error.code().message(), " (", error.what(), ")");
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

Dataset read_hdf5(const std::filesystem::path& file, const LoadOptions& options) {
  silence_hdf5();
  const std::string label = file.string();
  Hdf5Reader in(file, label);
  Dataset d;
  read_flags(in, label, d);

  // Shapes first (so that the progress bar knows the total), then the data.
  const std::int64_t n = in.shape("/graph/indptr", kInt64, 1).first - 1;
  TESSERA_CHECK(n >= 0, InvalidInput, label, ": /graph/indptr: expected at least 1 entry");
  const std::int64_t nnz = in.shape("/graph/indices", kInt32, 1).first;
  const auto [feature_rows, feature_cols] = in.shape("/features", kFloat32, 2);
  std::uint64_t total =
      static_cast<std::uint64_t>(n + 1) * 8 + nnz * 4 + feature_rows * feature_cols * 4 + n * 8;
  in.start_progress(total, options.progress);

  std::vector<EdgeOffset> indptr = in.vector<EdgeOffset>("/graph/indptr", kInt64, n + 1);
  std::vector<NodeId> indices = in.vector<NodeId>("/graph/indices", kInt32, nnz);
  try {
    d.graph = Csr(n, n, std::move(indptr), std::move(indices));
  } catch (const Error& error) {
    TESSERA_FAIL(InvalidInput, label, ": /graph: ", error.message());
  }
  d.features = in.matrix("/features", n);
  if (d.task == TaskType::MultiClass) {
    d.labels = in.vector<std::int64_t>("/labels", kInt64, n);
  } else {
    d.targets = in.matrix("/targets", n);
  }
  d.train_idx = in.vector<GlobalId>("/split/train", kInt64, -1);
  d.valid_idx = in.vector<GlobalId>("/split/valid", kInt64, -1);
  d.test_idx = in.vector<GlobalId>("/split/test", kInt64, -1);
  in.finish_progress();

  validate(d, label);
  if (in.has_attribute("fingerprint")) {
    const auto stored = in.integer_attribute<std::uint64_t>("fingerprint");
    const std::uint64_t computed = fingerprint(d);
    TESSERA_CHECK(stored == computed, InvalidInput, label, ": fingerprint mismatch (attribute ",
                  hex(stored), ", contents give ", hex(computed),
                  "): the file is corrupt or was modified after writing");
  }
  return d;
}

}  // namespace tessera
