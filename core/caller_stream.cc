// SPDX-License-Identifier: Apache-2.0
// CurrentDevice, CallerStream and memory_on (core/caller_stream.h): CUDA events between the
// caller's stream and Tessera's compute stream (core/cuda/runtime.h) when the CUDA backend is
// built.
#include "core/caller_stream.h"

#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#endif

namespace tessera {

#ifdef TESSERA_HAVE_CUDA

namespace {

cudaStream_t as_stream(std::uintptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

}  // namespace

CurrentDevice::CurrentDevice(Device device, bool make_current) {
  if (device.kind == DeviceKind::Cpu || !cuda::cuda_available()) return;
  int previous = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&previous));
  if (make_current) cuda::require_device(device.index, "a call on a GPU");
  previous_ = previous;
}

CurrentDevice::~CurrentDevice() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

CallerStream::CallerStream(Device device, std::uintptr_t stream)
    : current_(device), device_(device), stream_(stream) {
  if (device_.kind == DeviceKind::Cpu) return;
  cuda::Event queued;
  queued.record(as_stream(stream_));
  queued.wait_on(cuda::compute_stream());
}

void CallerStream::finish() {
  if (device_.kind == DeviceKind::Cpu) return;
  cuda::Event written;
  written.record(cuda::compute_stream());
  written.wait_on(as_stream(stream_));
}

bool memory_on(Device device, const void* ptr) {
  if (!cuda::cuda_available()) return device.kind == DeviceKind::Cpu;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // not a pointer CUDA knows: host memory
    return device.kind == DeviceKind::Cpu;
  }
  const bool gpu =
      attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  if (device.kind == DeviceKind::Cpu) return !gpu;
  return gpu && attributes.device == device.index;
}

#else

CurrentDevice::CurrentDevice(Device, bool) {}
CurrentDevice::~CurrentDevice() = default;
CallerStream::CallerStream(Device device, std::uintptr_t stream)
    : current_(device), device_(device), stream_(stream) {}
void CallerStream::finish() {}
bool memory_on(Device device, const void*) { return device.kind == DeviceKind::Cpu; }

#endif

}  // namespace tessera
