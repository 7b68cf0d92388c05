// SPDX-License-Identifier: Apache-2.0
// Device memory for Tessera: plain cudaMalloc (no managed memory) behind a caching pool, since
// cudaMalloc/cudaFree synchronise the device and cost tens of microseconds. Requests are rounded
// to a size class; freed blocks wait on their class's free list for the next request of that
// class on the same device. Reuse is safe in compute-stream order: a block freed by the host is
// handed out again only to work queued later on the compute stream. Memory used by the
// communication stream must be freed only after that work completed (requests keep it alive).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::cuda {

// The size a request is rounded to: 512 B minimum, the next power of two below 1 MiB, the next
// multiple of 2 MiB from there (so that a large tensor wastes at most 2 MiB).
std::size_t allocation_class(std::size_t bytes);

struct AllocatorStats {
  std::size_t bytes_in_use = 0;    // handed out (rounded sizes)
  std::size_t bytes_cached = 0;    // on the free lists
  std::uint64_t device_allocations = 0;  // cudaMalloc calls so far
};

// Allocates on the current device; never returns null (throws Error(Cuda) when the device is
// out of memory even after the cache was released). Zero bytes still gives a distinct block.
void* device_allocate(std::size_t bytes);
// Returns a block from device_allocate to its free list (null: nothing).
void device_free(void* ptr);
// Frees every cached block of every device (cudaFree).
void release_cached_memory();
AllocatorStats allocator_stats();

// An owned block of device memory from the pool (move-only).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : ptr_(device_allocate(bytes)), bytes_(bytes) {}
  ~DeviceBuffer() { device_free(ptr_); }
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      device_free(ptr_);
      ptr_ = other.ptr_;
      bytes_ = other.bytes_;
      other.ptr_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }
  // Grows (never shrinks) to at least `bytes`; contents are lost when it grows.
  void reserve(std::size_t bytes) {
    if (bytes > bytes_ || !ptr_) *this = DeviceBuffer(bytes);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace tessera::cuda
