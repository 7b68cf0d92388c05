// Device names and the single registry that maps a DeviceKind to its backend.
#include "engine/core/device.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/core/error.h"

namespace tessera {
namespace {

class CpuBackend final : public DeviceBackend {
 public:
  void* allocate(std::size_t bytes) override {
    // aligned_alloc needs a size that is a multiple of the alignment.
    std::size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void* ptr = std::aligned_alloc(64, rounded);
    TESSERA_CHECK(ptr != nullptr, Internal, "out of host memory allocating ", bytes, " bytes");
    return ptr;
  }
  void deallocate(void* ptr, std::size_t) override { std::free(ptr); }
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
    TESSERA_FAIL(Cuda, "device '", text,
                 "' requested, but this build of Tessera has no CUDA backend; use --device cpu");
  }
  TESSERA_FAIL(InvalidArgument, "unknown device '", text, "' (expected cpu or cuda[:index])");
}

DeviceBackend& backend(Device device) {
  static CpuBackend cpu;
  if (device.kind == DeviceKind::Cpu) return cpu;
  TESSERA_FAIL(InvalidArgument, "no backend for device ", to_string(device), " in this build");
}

}  // namespace tessera
