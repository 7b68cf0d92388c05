// SPDX-License-Identifier: Apache-2.0
// The cache of large host blocks (core/host_memory.h).
#include "core/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "core/error.h"

namespace tessera {
namespace {

std::atomic<std::int64_t> tensor_bytes{0};
std::atomic<std::int64_t> tensor_peak{0};

}  // namespace

void count_host_tensor_bytes(std::int64_t delta) {
  const std::int64_t now = tensor_bytes.fetch_add(delta, std::memory_order_relaxed) + delta;
  std::int64_t peak = tensor_peak.load(std::memory_order_relaxed);
  while (now > peak && !tensor_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

HostTensorBytes host_tensor_bytes() {
  return {static_cast<std::size_t>(tensor_bytes.load(std::memory_order_relaxed)),
          static_cast<std::size_t>(tensor_peak.load(std::memory_order_relaxed))};
}

void reset_host_tensor_peak() {
  tensor_peak.store(tensor_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

HostBlockCache::HostBlockCache(std::size_t capacity, std::size_t hold)
    : capacity_(capacity), hold_(std::max(capacity, hold)) {}

HostBlockCache::~HostBlockCache() { trim(); }

void* HostBlockCache::allocate(std::size_t bytes) {
  const std::size_t size = block_size(bytes);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = free_.find(size);
    in_use_ += size;
    peak_in_use_ = std::max(peak_in_use_, in_use_);
    if (it != free_.end()) {
      void* block = it->second;
      free_.erase(it);
      cached_ -= size;
      return block;
    }
    // What it holds for other sizes goes, largest first, until the mapping after this one stays
    // within the most blocks in use at once plus the capacity.
    unmap_over(peak_in_use_ + capacity_ - in_use_);
  }
  // Over-map by one granule and cut the mapping to a 2 MiB boundary, so that the kernel can back
  // it with huge pages from its first byte.
  const std::size_t span = size + kGranule;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    const std::lock_guard<std::mutex> lock(mutex_);
    in_use_ -= size;
  }
  TESSERA_CHECK(raw != MAP_FAILED, Internal, "out of host memory allocating ", bytes, " bytes");
  const auto at = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (at + kGranule - 1) / kGranule * kGranule;
  if (aligned > at) ::munmap(raw, aligned - at);
  const std::size_t tail = span - (aligned - at) - size;
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* block = reinterpret_cast<void*>(aligned);
  count_host_tensor_bytes(static_cast<std::int64_t>(size));
  ::madvise(block, size, MADV_HUGEPAGE);  // a hint: refused where THP is off, which is fine
  return block;
}

void HostBlockCache::deallocate(void* block, std::size_t bytes) {
  if (block == nullptr) return;
  const std::size_t size = block_size(bytes);
  const std::lock_guard<std::mutex> lock(mutex_);
  in_use_ -= size;
  if (size > hold_) {
    ::munmap(block, size);
    count_host_tensor_bytes(-static_cast<std::int64_t>(size));
    return;
  }
  free_.emplace(size, block);
  cached_ += size;
  unmap_over(hold_);
}

void HostBlockCache::unmap_over(std::size_t limit) {
  while (cached_ > limit && !free_.empty()) {
    const auto largest = std::prev(free_.end());
    ::munmap(largest->second, largest->first);
    count_host_tensor_bytes(-static_cast<std::int64_t>(largest->first));
    cached_ -= largest->first;
    free_.erase(largest);
  }
}

std::size_t HostBlockCache::cached_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

std::size_t HostBlockCache::trim() {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [size, block] : free_) {
    ::munmap(block, size);
    count_host_tensor_bytes(-static_cast<std::int64_t>(size));
  }
  free_.clear();
  const std::size_t unmapped = cached_;
  cached_ = 0;
  peak_in_use_ = in_use_;  // the bound starts again from what is in use now
  return unmapped;
}

HostBlockCache& host_block_cache() {
  // Never destroyed: tensors in static storage may be freed after any other static object.
  static HostBlockCache* cache = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const std::size_t physical =
        pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                              : std::size_t{0};
    const std::size_t limit = std::size_t{2} << 30;
    return physical > 0 ? new HostBlockCache(std::min(limit, physical / 16), physical / 2)
                        : new HostBlockCache(limit);
  }();
  return *cache;
}

}  // namespace tessera
