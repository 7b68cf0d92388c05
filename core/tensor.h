// SPDX-License-Identifier: Apache-2.0
// Tensor: an owning, 2-D, row-major block of memory tagged with dtype and device. Move-only;
// clone() copies. Kernels take Tensors (or raw pointers with explicit sizes) and check shapes.
// Relies on DeviceBackend for memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"

namespace tessera {

enum class DType : std::uint8_t { F32, BF16, F16, I8, U8, I32, I64 };

std::size_t dtype_size(DType dtype);
std::string_view to_string(DType dtype);

template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<std::int8_t>() { return DType::I8; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::U8; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::I64; }

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised contents.
  Tensor(std::int64_t rows, std::int64_t cols, DType dtype = DType::F32,
         Device device = Device::cpu());
  static Tensor zeros(std::int64_t rows, std::int64_t cols, DType dtype = DType::F32,
                      Device device = Device::cpu());
  // A tensor over memory it does not own (the caller's, which must outlive it and is never
  // freed by it): the caller's arrays passed to kernels without a copy. resize() to its own
  // shape keeps the memory; to another shape it replaces it with memory of its own.
  static Tensor borrow(void* data, std::int64_t rows, std::int64_t cols, DType dtype = DType::F32,
                       Device device = Device::cpu());

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t numel() const { return rows_ * cols_; }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool empty() const { return numel() == 0; }

  // Typed access; throws Internal when T does not match the dtype.
  template <class T>
  T* data() {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(storage_.get());
  }
  template <class T>
  const T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<const T*>(storage_.get());
  }
  float* f32() { return data<float>(); }
  const float* f32() const { return data<float>(); }
  // All values of an f32 tensor as one span (GPU memory for a GPU tensor).
  std::span<float> f32_span() { return {f32(), static_cast<std::size_t>(numel())}; }
  std::span<const float> f32_span() const { return {f32(), static_cast<std::size_t>(numel())}; }
  template <class T>
  T* row(std::int64_t r) {
    return data<T>() + r * cols_;
  }
  template <class T>
  const T* row(std::int64_t r) const {
    return data<T>() + r * cols_;
  }
  void* raw() { return storage_.get(); }
  const void* raw() const { return storage_.get(); }

  Tensor clone() const;
  // A copy on `device` (a clone when it is this tensor's device).
  Tensor to(Device device) const;
  // Copies `src` (same shape and dtype, any device) into this tensor's memory; a copy between
  // host and GPU returns once the bytes arrived.
  void copy_from(const Tensor& src);
  void zero();
  // Same shape, dtype and device as other?
  bool same_shape(const Tensor& other) const {
    return rows_ == other.rows_ && cols_ == other.cols_;
  }
  // Reallocates only when the shape changes; contents are undefined afterwards.
  void resize(std::int64_t rows, std::int64_t cols);
  // As resize, and moves the tensor to `device` (reallocating) when it lives elsewhere. Layers
  // size their outputs with their input's device, so a model runs where its input lives.
  void resize(std::int64_t rows, std::int64_t cols, Device device);
  // A workspace whose width changes from call to call (a layer's): keeps its memory when the
  // new shape fits in it (contents undefined), else as resize(rows, cols, device). A workspace
  // made once at its widest shape then never allocates again: one block instead of one per
  // width, which the block cache would otherwise keep (core/host_memory.h).
  void resize_within(std::int64_t rows, std::int64_t cols, Device device);
  std::string shape_string() const;

 private:
  struct Deleter {
    Device device;
    std::size_t bytes;
    bool owned = true;  // false: borrowed memory, left to its owner
    void operator()(void* ptr) const;
  };
  void check_dtype(DType expected) const;

  std::unique_ptr<void, Deleter> storage_{nullptr, Deleter{Device::cpu(), 0}};
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  DType dtype_ = DType::F32;
  Device device_ = Device::cpu();
};

// Rows [first, first + count) of `t` as a tensor over t's memory, on t's device: a block of rows
// handed to a kernel without a copy. The const form is for reading only.
Tensor borrow_rows(Tensor& t, std::int64_t first, std::int64_t count);
const Tensor borrow_rows(const Tensor& t, std::int64_t first, std::int64_t count);

// The values of an f32 tensor, wherever it lives, copied to host memory.
std::vector<float> host_f32(const Tensor& t);

// A one-column tensor on `device` holding `values`: an index list uploaded once, which the GPU
// kernels then read in place (kernels.h takes it back as a span).
Tensor index_tensor(std::span<const std::int32_t> values, Device device);
Tensor index_tensor(std::span<const std::int64_t> values, Device device);

// A host index list and its copy on a device, made on the first use there: the lists a GPU
// kernel reads every epoch (halo send rows, boundary rows). `host` must outlive this.
class DeviceIndexList {
 public:
  DeviceIndexList() = default;
  explicit DeviceIndexList(std::span<const std::int32_t> host) : host_(host) {}
  // The list where a kernel on `device` reads it: the host list itself on the CPU.
  std::span<const std::int32_t> on(Device device);

 private:
  std::span<const std::int32_t> host_;
  Tensor device_copy_;  // (n, 1) i32 on the device of the last GPU use
};

// Throws InvalidArgument "<what>: expected (r, c), got (r', c')" when the shape differs.
void check_shape(const Tensor& t, std::int64_t rows, std::int64_t cols, const char* what);

}  // namespace tessera
