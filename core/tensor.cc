// SPDX-License-Identifier: Apache-2.0
// Tensor storage through the device backend.
#include "core/tensor.h"

namespace tessera {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I8: return 1;
    case DType::U8: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 0;
}

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
  }
  return "?";
}

void Tensor::Deleter::operator()(void* ptr) const {
  if (ptr && owned) backend(device).deallocate(ptr, bytes);
}

Tensor::Tensor(std::int64_t rows, std::int64_t cols, DType dtype, Device device)
    : rows_(rows), cols_(cols), dtype_(dtype), device_(device) {
  TESSERA_CHECK(rows >= 0 && cols >= 0, InvalidArgument, "negative tensor shape (", rows, ", ",
                cols, ")");
  std::size_t n = bytes();
  storage_ = std::unique_ptr<void, Deleter>(backend(device).allocate(n), Deleter{device, n});
}

Tensor Tensor::borrow(void* data, std::int64_t rows, std::int64_t cols, DType dtype,
                      Device device) {
  TESSERA_CHECK(rows >= 0 && cols >= 0, InvalidArgument, "negative tensor shape (", rows, ", ",
                cols, ")");
  Tensor t;
  t.rows_ = rows;
  t.cols_ = cols;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::unique_ptr<void, Deleter>(data, Deleter{device, t.bytes(), false});
  return t;
}

Tensor Tensor::zeros(std::int64_t rows, std::int64_t cols, DType dtype, Device device) {
  Tensor t(rows, cols, dtype, device);
  t.zero();
  return t;
}

Tensor Tensor::clone() const {
  Tensor out(rows_, cols_, dtype_, device_);
  backend(device_).copy(out.raw(), raw(), bytes());
  return out;
}

Tensor Tensor::to(Device device) const {
  Tensor out(rows_, cols_, dtype_, device);
  out.copy_from(*this);
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  TESSERA_CHECK(same_shape(src) && dtype_ == src.dtype_, InvalidArgument,
                "Tensor::copy_from: source ", src.shape_string(), " ", to_string(src.dtype_),
                " does not match destination ", shape_string(), " ", to_string(dtype_));
  // The GPU side's backend copies in either direction (host and GPU share one address space).
  const Device by = device_.kind != DeviceKind::Cpu ? device_ : src.device_;
  backend(by).copy(raw(), src.raw(), bytes());
}

void Tensor::zero() { backend(device_).memset_zero(raw(), bytes()); }

void Tensor::resize(std::int64_t rows, std::int64_t cols) {
  if (rows == rows_ && cols == cols_ && storage_) return;
  *this = Tensor(rows, cols, dtype_, device_);
}

void Tensor::resize(std::int64_t rows, std::int64_t cols, Device device) {
  if (device != device_) *this = Tensor(0, 0, dtype_, device);
  resize(rows, cols);
}

void Tensor::resize_within(std::int64_t rows, std::int64_t cols, Device device) {
  const Deleter& held = storage_.get_deleter();
  const std::size_t need = static_cast<std::size_t>(rows * cols) * dtype_size(dtype_);
  if (storage_ && held.owned && device == device_ && need <= held.bytes && rows >= 0 &&
      cols >= 0) {
    rows_ = rows;
    cols_ = cols;
    return;
  }
  resize(rows, cols, device);
}

std::string Tensor::shape_string() const {
  return "(" + std::to_string(rows_) + ", " + std::to_string(cols_) + ")";
}

void Tensor::check_dtype(DType expected) const {
  TESSERA_CHECK(expected == dtype_, Internal, "tensor of dtype ", to_string(dtype_),
                " accessed as ", to_string(expected));
}

namespace {
template <class T>
Tensor index_tensor_of(std::span<const T> values, Device device) {
  Tensor t(static_cast<std::int64_t>(values.size()), 1, dtype_of<T>(), device);
  backend(device).copy(t.raw(), values.data(), values.size_bytes());
  return t;
}
}  // namespace

Tensor borrow_rows(Tensor& t, std::int64_t first, std::int64_t count) {
  TESSERA_CHECK(first >= 0 && count >= 0 && first + count <= t.rows(), Internal, "rows ", first,
                " to ", first + count, " of a tensor ", t.shape_string());
  auto* base = static_cast<std::byte*>(t.raw());
  if (base == nullptr) return Tensor::borrow(nullptr, count, t.cols(), t.dtype(), t.device());
  const auto row_bytes = static_cast<std::size_t>(t.cols()) * dtype_size(t.dtype());
  return Tensor::borrow(base + static_cast<std::size_t>(first) * row_bytes, count, t.cols(),
                        t.dtype(), t.device());
}

const Tensor borrow_rows(const Tensor& t, std::int64_t first, std::int64_t count) {
  return borrow_rows(const_cast<Tensor&>(t), first, count);  // read only: the result is const
}

std::vector<float> host_f32(const Tensor& t) {
  std::vector<float> values(static_cast<std::size_t>(t.numel()));
  backend(t.device()).copy(values.data(), t.f32(), t.bytes());
  return values;
}

Tensor index_tensor(std::span<const std::int32_t> values, Device device) {
  return index_tensor_of(values, device);
}
Tensor index_tensor(std::span<const std::int64_t> values, Device device) {
  return index_tensor_of(values, device);
}

std::span<const std::int32_t> DeviceIndexList::on(Device device) {
  if (device.kind == DeviceKind::Cpu) return host_;
  if (device_copy_.device() != device || device_copy_.rows() != std::ssize(host_))
    device_copy_ = index_tensor(host_, device);
  return {device_copy_.data<std::int32_t>(), host_.size()};
}

void check_shape(const Tensor& t, std::int64_t rows, std::int64_t cols, const char* what) {
  TESSERA_CHECK(t.rows() == rows && t.cols() == cols, InvalidArgument, what, ": expected (",
                rows, ", ", cols, "), got ", t.shape_string());
}

}  // namespace tessera
