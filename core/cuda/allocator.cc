// SPDX-License-Identifier: Apache-2.0
// The caching device allocator: per-device free lists keyed by size class, a table of live
// blocks (so that a free needs no size), one mutex. On out-of-memory the device's cache is
// released and the cudaMalloc retried once.
#include "core/cuda/allocator.h"

#include <bit>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda/check.h"

namespace tessera::cuda {
namespace {

constexpr std::size_t kMinClass = 512;
constexpr std::size_t kLargeFrom = std::size_t{1} << 20;
constexpr std::size_t kLargeStep = std::size_t{2} << 20;

struct Block {
  int device;
  std::size_t size;  // its class
};

struct Pool {
  std::mutex mutex;
  std::unordered_map<void*, Block> live;
  std::map<std::pair<int, std::size_t>, std::vector<void*>> free_lists;  // (device, class)
  AllocatorStats stats;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: blocks may be freed during static teardown
  return *p;
}

// cudaFree of every cached block of `device` (all devices when device < 0); mutex held.
void release_locked(Pool& p, int device) {
  int previous = 0;
  const bool switched = device >= 0 && cudaGetDevice(&previous) == cudaSuccess;
  for (auto it = p.free_lists.begin(); it != p.free_lists.end();) {
    if (device >= 0 && it->first.first != device) {
      ++it;
      continue;
    }
    cudaSetDevice(it->first.first);
    for (void* ptr : it->second) {
      cudaFree(ptr);
      p.stats.bytes_cached -= it->first.second;
    }
    it = p.free_lists.erase(it);
  }
  if (switched) cudaSetDevice(previous);
}

}  // namespace

std::size_t allocation_class(std::size_t bytes) {
  if (bytes <= kMinClass) return kMinClass;
  if (bytes < kLargeFrom) return std::bit_ceil(bytes);
  return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

void* device_allocate(std::size_t bytes) {
  int device = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&device));
  const std::size_t size = allocation_class(bytes);
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  auto list = p.free_lists.find({device, size});
  if (list != p.free_lists.end() && !list->second.empty()) {
    void* ptr = list->second.back();
    list->second.pop_back();
    p.stats.bytes_cached -= size;
    p.stats.bytes_in_use += size;
    p.live.emplace(ptr, Block{device, size});
    return ptr;
  }
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, size);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    release_locked(p, device);
    status = cudaMalloc(&ptr, size);
  }
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    TESSERA_FAIL(Cuda, "cudaMalloc of ", size, " bytes (", bytes, " requested) on GPU ", device,
                 " failed: ", error_string(status), "; ", p.stats.bytes_in_use,
                 " bytes in use by Tessera");
  }
  ++p.stats.device_allocations;
  p.stats.bytes_in_use += size;
  p.live.emplace(ptr, Block{device, size});
  return ptr;
}

void device_free(void* ptr) {
  if (!ptr) return;
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  auto it = p.live.find(ptr);
  TESSERA_CHECK(it != p.live.end(), Internal, "device_free of a pointer the CUDA pool did not "
                "hand out");
  const Block block = it->second;
  p.live.erase(it);
  p.stats.bytes_in_use -= block.size;
  p.stats.bytes_cached += block.size;
  p.free_lists[{block.device, block.size}].push_back(ptr);
}

void release_cached_memory() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  release_locked(p, -1);
}

AllocatorStats allocator_stats() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  return p.stats;
}

}  // namespace tessera::cuda
