// SPDX-License-Identifier: Apache-2.0
// The cache of large host blocks (core/host_memory.h): blocks are 2 MiB aligned and rounded,
// a freed block serves the next request of its rounded size, the cache never keeps more than
// its hold, and no more than its capacity once it maps a new block (largest blocks unmapped
// first), and CPU tensors of a large size reuse the
// storage that one of the same size freed (except under AddressSanitizer, which bypasses it).
// The count of host tensor memory (what the planner measures a step with) rises and falls with
// tensors and with what the cache maps; resize_within keeps a workspace's memory for narrower
// shapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "core/host_memory.h"
#include "core/tensor.h"

namespace tessera {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(HostBlockCache, FreedBlocksServeTheSameRoundedSize) {
  HostBlockCache cache(64 * kMiB);
  void* a = cache.allocate(5 * kMiB);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % HostBlockCache::kGranule, 0u);
  std::memset(a, 7, 5 * kMiB);  // the whole block is usable
  cache.deallocate(a, 5 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 6 * kMiB);  // rounded to the 2 MiB granule
  void* b = cache.allocate(5 * kMiB + 123);   // the same rounded size: the same block
  EXPECT_EQ(b, a);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  void* c = cache.allocate(8 * kMiB);  // another size: a new block
  EXPECT_NE(c, a);
  cache.deallocate(b, 5 * kMiB);
  cache.deallocate(c, 8 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 14 * kMiB);
  cache.trim();
  EXPECT_EQ(cache.cached_bytes(), 0u);
}

TEST(HostBlockCache, KeepsAtMostItsCapacity) {
  HostBlockCache cache(16 * kMiB);
  void* small = cache.allocate(6 * kMiB);
  void* large = cache.allocate(10 * kMiB);
  void* other = cache.allocate(6 * kMiB);
  cache.deallocate(small, 6 * kMiB);
  cache.deallocate(large, 10 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 16 * kMiB);
  cache.deallocate(other, 6 * kMiB);  // 22 MiB: the largest (10 MiB) goes
  EXPECT_EQ(cache.cached_bytes(), 12 * kMiB);
  void* over = cache.allocate(20 * kMiB);  // above the capacity: never cached
  cache.deallocate(over, 20 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 12 * kMiB);
}

TEST(HostBlockCache, HoldsMoreBetweenMappingsAndTrimsBeforeANewOne) {
  host_block_cache().trim();
  const std::size_t before = host_tensor_bytes().current;
  HostBlockCache cache(8 * kMiB, 64 * kMiB);
  EXPECT_EQ(std::pair(cache.capacity(), cache.hold()), std::pair(8 * kMiB, 64 * kMiB));
  void* a = cache.allocate(20 * kMiB);
  void* b = cache.allocate(10 * kMiB);  // 30 MiB in use: the most at once so far
  cache.deallocate(a, 20 * kMiB);
  cache.deallocate(b, 10 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 30 * kMiB);  // over the capacity, within the hold
  void* again = cache.allocate(20 * kMiB);     // served from what it held: no new mapping
  EXPECT_EQ(again, a);
  cache.deallocate(again, 20 * kMiB);
  EXPECT_EQ(host_tensor_bytes().current, before + 30 * kMiB);
  // Another size: 6 MiB in use and 30 held map 36 MiB, within the 30 in use at most plus the
  // capacity, so nothing held goes.
  void* other = cache.allocate(6 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 30 * kMiB);
  EXPECT_EQ(host_tensor_bytes().current, before + 36 * kMiB);
  // 22 MiB in use with 30 held would map 52: the largest held block goes (20 MiB), leaving 32,
  // within 30 + 8.
  void* more = cache.allocate(16 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 10 * kMiB);
  EXPECT_EQ(host_tensor_bytes().current, before + 32 * kMiB);
  cache.deallocate(other, 6 * kMiB);
  cache.deallocate(more, 16 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 32 * kMiB);
  // 70 MiB, above the hold: the held blocks go down to the capacity before it is mapped (the
  // most in use at once is now 70 MiB itself), and it is never kept.
  void* huge = cache.allocate(70 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 6 * kMiB);
  EXPECT_EQ(host_tensor_bytes().current, before + 76 * kMiB);
  cache.deallocate(huge, 70 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 6 * kMiB);
  cache.trim();
  EXPECT_EQ(host_tensor_bytes().current, before);
  EXPECT_EQ(HostBlockCache(8 * kMiB, kMiB).hold(), 8 * kMiB);  // never below the capacity
  EXPECT_GE(host_block_cache().hold(), host_block_cache().capacity());
}

TEST(HostBlockCache, ATrimRestartsTheMostInUse) {
  HostBlockCache cache(4 * kMiB, 64 * kMiB);
  cache.deallocate(cache.allocate(40 * kMiB), 40 * kMiB);
  cache.trim();  // 40 MiB in use at most before the trim; nothing in use now
  void* a = cache.allocate(10 * kMiB);
  cache.deallocate(a, 10 * kMiB);
  void* b = cache.allocate(6 * kMiB);  // 6 + 10 held > 10 at most + 4: the 10 MiB block goes
  EXPECT_EQ(cache.cached_bytes(), 0u);
  cache.deallocate(b, 6 * kMiB);
  cache.trim();
}

TEST(HostBlockCache, LargeTensorsReuseFreedStorage) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer builds bypass the cache";
#else
  const std::int64_t rows = 4096, cols = 512;  // 8 MiB
  const void* first = nullptr;
  {
    Tensor t(rows, cols);
    first = t.raw();
    t.zero();
  }
  Tensor again(rows, cols);
  EXPECT_EQ(again.raw(), first);
  Tensor small(16, 16);  // below kLargeBlock: the C library's
  EXPECT_NE(small.raw(), nullptr);
#endif
}

TEST(HostTensorBytes, RiseAndFallWithTensorsAndTheCachesMappings) {
  host_block_cache().trim();
  const std::size_t before = host_tensor_bytes().current;
  reset_host_tensor_peak();
  {
    Tensor big(2048, 1024);  // 8 MiB
    Tensor small(10, 10);
    EXPECT_GE(host_tensor_bytes().current, before + 8 * kMiB + 400);
  }
  EXPECT_GE(host_tensor_bytes().peak, before + 8 * kMiB + 400);
  host_block_cache().trim();  // the freed large block, if the cache kept it
  EXPECT_EQ(host_tensor_bytes().current, before);
  reset_host_tensor_peak();
  EXPECT_EQ(host_tensor_bytes().peak, before);

  // A cache maps blocks (counted) and keeps freed ones mapped until it unmaps them.
  HostBlockCache cache(16 * kMiB);
  void* kept = cache.allocate(6 * kMiB);
  EXPECT_EQ(host_tensor_bytes().current, before + 6 * kMiB);
  cache.deallocate(kept, 6 * kMiB);
  EXPECT_EQ(host_tensor_bytes().current, before + 6 * kMiB);  // cached, still mapped
  void* large = cache.allocate(20 * kMiB);  // over the capacity: unmapped when freed
  EXPECT_EQ(host_tensor_bytes().current, before + 26 * kMiB);
  cache.deallocate(large, 20 * kMiB);
  EXPECT_EQ(host_tensor_bytes().current, before + 6 * kMiB);
  cache.trim();
  EXPECT_EQ(host_tensor_bytes().current, before);
}

TEST(Tensor, ResizeWithinKeepsTheMemoryOfAWiderShape) {
  Tensor t(100, 64);
  const void* wide = t.raw();
  t.resize_within(100, 32, Device::cpu());
  EXPECT_EQ(t.raw(), wide);
  EXPECT_EQ(t.cols(), 32);
  EXPECT_EQ(t.bytes(), 100u * 32u * 4u);
  t.resize_within(100, 64, Device::cpu());  // back to the width it holds: still no allocation
  EXPECT_EQ(t.raw(), wide);
  t.resize_within(100, 65, Device::cpu());  // wider: memory of its own
  EXPECT_EQ(t.cols(), 65);
  float outside[8] = {};
  Tensor borrowed = Tensor::borrow(outside, 2, 4);
  borrowed.resize_within(1, 4, Device::cpu());  // borrowed memory is never reshaped
  EXPECT_NE(borrowed.raw(), static_cast<void*>(outside));
  EXPECT_EQ(borrowed.rows(), 1);
}

}  // namespace
}  // namespace tessera
