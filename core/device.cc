// SPDX-License-Identifier: Apache-2.0
// Device names and the single registry that maps a DeviceKind to its backend. The CUDA backend
// (core/cuda/) is registered when Tessera is built with it (TESSERA_HAVE_CUDA).
#include "core/device.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"
#include "core/host_memory.h"
#ifdef TESSERA_HAVE_CUDA
#include "core/cuda/device_cuda.h"
#include "core/cuda/runtime.h"
#endif

namespace tessera {
namespace {

// Large blocks through the cache of core/host_memory.h, except under AddressSanitizer.
#ifdef __SANITIZE_ADDRESS__
constexpr bool kCacheLargeBlocks = false;
#else
constexpr bool kCacheLargeBlocks = true;
#endif

// What aligned_alloc is asked for: a multiple of the alignment, at least one.
std::size_t small_block_size(std::size_t bytes) { return bytes == 0 ? 64 : (bytes + 63) / 64 * 64; }

class CpuBackend final : public DeviceBackend {
 public:
  void* allocate(std::size_t bytes) override {
    if (kCacheLargeBlocks && bytes >= HostBlockCache::kLargeBlock)
      return host_block_cache().allocate(bytes);
    const std::size_t rounded = small_block_size(bytes);
    void* ptr = std::aligned_alloc(64, rounded);
    TESSERA_CHECK(ptr != nullptr, Internal, "out of host memory allocating ", bytes, " bytes");
    count_host_tensor_bytes(static_cast<std::int64_t>(rounded));
    return ptr;
  }
  void deallocate(void* ptr, std::size_t bytes) override {
    if (kCacheLargeBlocks && bytes >= HostBlockCache::kLargeBlock) {
      host_block_cache().deallocate(ptr, bytes);
      return;
    }
    if (ptr != nullptr)
      count_host_tensor_bytes(-static_cast<std::int64_t>(small_block_size(bytes)));
    std::free(ptr);
  }
  void memset_zero(void* ptr, std::size_t bytes) override {
    if (bytes) std::memset(ptr, 0, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
};

}  // namespace

std::string to_string(Device device) {
  if (device.kind == DeviceKind::Cpu) return "cpu";
  return "cuda:" + std::to_string(device.index);
}

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda" || text.rfind("cuda:", 0) == 0) {
#ifdef TESSERA_HAVE_CUDA
    int index = 0;
    if (text != "cuda") {
      const std::string digits = text.substr(5);
      TESSERA_CHECK(!digits.empty() && digits.size() <= 4 &&
                        digits.find_first_not_of("0123456789") == std::string::npos,
                    InvalidArgument, "unknown device '", text, "' (expected cpu or cuda[:index])");
      index = std::stoi(digits);
    }
    TESSERA_CHECK(cuda::cuda_available(), Cuda, "device '", text,
                  "' requested, but no usable CUDA GPU was found (", cuda::unavailable_reason(),
                  "); use --device cpu");
    TESSERA_CHECK(index < cuda::device_count(), Cuda, "device '", text,
                  "' requested, but this machine has ", cuda::device_count(), " CUDA GPU(s)");
    return Device{DeviceKind::Cuda, index};
#else
    TESSERA_FAIL(Cuda, "device '", text,
                 "' requested, but this build of Tessera has no CUDA backend; use --device cpu");
#endif
  }
  TESSERA_FAIL(InvalidArgument, "unknown device '", text, "' (expected cpu or cuda[:index])");
}

int gpu_count() {
#ifdef TESSERA_HAVE_CUDA
  return cuda::cuda_available() ? cuda::device_count() : 0;
#else
  return 0;
#endif
}

std::uint64_t gpu_memory_bytes(Device device) {
  if (device.kind == DeviceKind::Cpu) return 0;
#ifdef TESSERA_HAVE_CUDA
  return cuda::device_memory_bytes(device.index);
#else
  TESSERA_FAIL(InvalidArgument, "the memory of ", to_string(device),
               ": this build has no CUDA backend");
#endif
}

std::string resolve_device_number(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos)
    return text;
  return gpu_count() > 0 ? "cuda:" + text : "cpu";
}

DeviceBackend& backend(Device device) {
  static CpuBackend cpu;
  if (device.kind == DeviceKind::Cpu) return cpu;
#ifdef TESSERA_HAVE_CUDA
  if (device.kind == DeviceKind::Cuda) return cuda::device_backend(device.index);
#endif
  TESSERA_FAIL(InvalidArgument, "no backend for device ", to_string(device), " in this build");
}

}  // namespace tessera
