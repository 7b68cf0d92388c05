// SPDX-License-Identifier: Apache-2.0
// Host memory of CPU tensors (core/device.cc). Small blocks come from the C library. Large ones
// (>= HostBlockCache::kLargeBlock) are mapped directly with transparent huge pages requested
// (madvise) and, when freed, kept for the next tensor of the same size: a training step frees
// and allocates the same large activations and workspaces every epoch and evaluation, and the
// C library unmaps blocks above 32 MiB on free, so each of them paid the kernel's page clearing
// again (a third of a pipelined epoch at 4 ranks on synth:arxiv-like, a seventh of an epoch on
// synth:products-like). Builds with AddressSanitizer bypass the cache, so that use after free
// stays detectable.
//
// Two bounds keep the cache from raising a run's peak: between new mappings it holds up to
// `hold` bytes of freed blocks, which the next tensors of those sizes reuse; before it maps a
// new block it first unmaps cached ones (largest first) until the mapped total with the new
// block is at most the most blocks in use at once (since the last trim) plus `capacity`. The
// mapped total grows only at a new mapping, so its highest is never above that, as with
// `capacity` alone, however much is held in between (a process's memory stays near its own peak
// between steps instead of falling back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace tessera {

class HostBlockCache {
 public:
  static constexpr std::size_t kLargeBlock = std::size_t{4} << 20;  // smaller: the C library
  static constexpr std::size_t kGranule = std::size_t{2} << 20;     // a huge page

  // Holds at most `hold` bytes of freed blocks; before it maps a new block, at most what keeps
  // the mapped total within the most blocks in use at once plus `capacity` (evicting the largest
  // first; `hold` below `capacity` counts as `capacity`).
  explicit HostBlockCache(std::size_t capacity, std::size_t hold = 0);
  ~HostBlockCache();  // unmaps the cached blocks
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  // A block of at least `bytes` (>= kLargeBlock), 2 MiB aligned: a cached one of the same
  // rounded size, or a new mapping. Throws Internal when the system has no memory left.
  void* allocate(std::size_t bytes);
  // `bytes` as given to allocate.
  void deallocate(void* block, std::size_t bytes);
  std::size_t cached_bytes() const;
  std::size_t capacity() const { return capacity_; }
  std::size_t hold() const { return hold_; }
  // Unmaps every cached block (returns their bytes); the most in use at once restarts from now.
  std::size_t trim();

  // The mapped size of a block of `bytes`: rounded up to kGranule.
  static std::size_t block_size(std::size_t bytes) {
    return (bytes + kGranule - 1) / kGranule * kGranule;
  }

 private:
  void unmap_over(std::size_t limit);  // lock held

  const std::size_t capacity_;
  const std::size_t hold_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;  // by mapped size
  std::size_t cached_ = 0;
  std::size_t in_use_ = 0;       // blocks handed out and not yet returned
  std::size_t peak_in_use_ = 0;  // the most of them at once since the last trim
};

// The process's cache of large host blocks: capacity min(2 GiB, physical memory / 16), hold
// physical memory / 2.
HostBlockCache& host_block_cache();

// The host memory of CPU tensors: large blocks mapped (in use or cached) plus small blocks in
// use, now and at its highest since the last reset_host_tensor_peak(). The planner
// (engine/planner.h) measures a training step's memory with it.
struct HostTensorBytes {
  std::size_t current = 0;
  std::size_t peak = 0;
};
HostTensorBytes host_tensor_bytes();
void reset_host_tensor_peak();  // peak = current
// The CPU backend's count of small blocks (core/device.cc); large ones are counted here.
void count_host_tensor_bytes(std::int64_t delta);

}  // namespace tessera
