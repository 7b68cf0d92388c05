// SPDX-License-Identifier: Apache-2.0
// Device: where a tensor lives and where a kernel runs. The CPU backend is complete; a CUDA
// backend plugs in by implementing DeviceBackend in core/cuda/ and registering it in
// device.cc (the one place that maps a DeviceKind to its backend).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

enum class DeviceKind { Cpu, Cuda };

struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;

  static Device cpu() { return {DeviceKind::Cpu, 0}; }
  bool operator==(const Device&) const = default;
};

std::string to_string(Device device);
// Parses "cpu" or "cuda[:i]"; throws InvalidArgument naming the text otherwise, and Cuda when
// this build or machine has no usable GPU.
Device parse_device(const std::string& text);

// Memory operations every device provides.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual void* allocate(std::size_t bytes) = 0;  // aligned to 64 bytes; never null
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;  // bytes as given to allocate
  virtual void memset_zero(void* ptr, std::size_t bytes) = 0;
  // Copies between this device and host (or within this device).
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
};

// GPUs this process can use: 0 in a build without the CUDA backend or on a machine without one.
int gpu_count();
// The memory of a GPU in bytes; 0 for the CPU (whose memory is engine/system.h's
// physical_memory_bytes).
std::uint64_t gpu_memory_bytes(Device device);
// OGB's --device N: "cuda:N" when this process can use a GPU, else "cpu" (as OGB's examples
// fall back); any other text as it is.
std::string resolve_device_number(const std::string& text);

// The backend of a device; throws InvalidArgument when it is not available in this build.
DeviceBackend& backend(Device device);

}  // namespace tessera
