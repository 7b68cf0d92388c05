// SPDX-License-Identifier: Apache-2.0
// Spans for the CUDA kernels. The kernel API (core/kernels.h) takes index lists and
// per-column vectors as spans, which may point to host memory (the usual case: labels, row
// lists, batch-norm statistics) or to GPU memory (what a GPU-resident caller keeps there, such
// as the global ids that key dropout). These give the GPU pointer of such a span: the span
// itself when it already is GPU memory, else a copy made for the one call on the compute stream
// (and, for outputs, copied back by finish()). A staged copy is returned to the caching pool
// when the object dies, which is safe in compute-stream order (core/cuda/allocator.h).
#pragma once

#include <span>

#include "core/cuda/allocator.h"
#include "core/cuda/runtime.h"

namespace tessera::cuda {

// A span read by a kernel.
template <class T>
class DeviceInput {
 public:
  explicit DeviceInput(std::span<const T> span) {
    if (span.empty()) return;
    if (is_device_memory(span.data())) {
      ptr_ = span.data();
      return;
    }
    buffer_ = DeviceBuffer(span.size_bytes());
    upload(buffer_.get(), span.data(), span.size_bytes());
    ptr_ = buffer_.as<const T>();
  }
  const T* get() const { return ptr_; }  // null for an empty span

 private:
  const T* ptr_ = nullptr;
  DeviceBuffer buffer_;
};

// A span written (or accumulated into) by a kernel: a host span is uploaded first, and finish()
// copies the result back.
template <class T>
class DeviceOutput {
 public:
  explicit DeviceOutput(std::span<T> span) : host_(span) {
    if (span.empty()) return;
    if (is_device_memory(span.data())) {
      ptr_ = span.data();
      host_ = {};
      return;
    }
    buffer_ = DeviceBuffer(span.size_bytes());
    upload(buffer_.get(), span.data(), span.size_bytes());
    ptr_ = buffer_.as<T>();
  }
  T* get() const { return ptr_; }  // null for an empty span
  // Copies a staged result back to the host span (no-op for GPU spans); waits for the kernels.
  void finish() {
    if (!host_.empty()) download(host_.data(), ptr_, host_.size_bytes());
  }

 private:
  std::span<T> host_;  // the host span to copy back to; empty for GPU spans
  T* ptr_ = nullptr;
  DeviceBuffer buffer_;
};

}  // namespace tessera::cuda
