// SPDX-License-Identifier: Apache-2.0
// The CUDA runtime of Tessera: whether a usable GPU exists (without a driver the answer is no,
// never a crash), the per-device compute and communication streams with events, and the cuBLAS
// and cuSPARSE handles bound to the compute stream. Safe to include from code built without
// nvcc; every vendor call is checked with the macros of core/cuda/check.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::cuda {

// Number of usable GPUs; 0 when the driver is missing or too old (cudaGetDeviceCount fails with
// cudaErrorInsufficientDriver or cudaErrorNoDevice and leaves its output unwritten). Cached.
int device_count();
bool cuda_available();
// Why no GPU is usable ("" when one is), e.g. "cudaGetDeviceCount: CUDA driver version is
// insufficient for CUDA runtime version (cudaErrorInsufficientDriver)".
std::string unavailable_reason();
// Throws Error(Cuda) naming `what` and the reason when no GPU is usable or `index` is not one of
// them; otherwise makes `index` the current device of this thread.
void require_device(int index, const char* what);
// The physical identity of device `index`: "GPU-" and its UUID in hex, the same whichever
// CUDA_VISIBLE_DEVICES numbering a process sees it under.
std::string device_identity(int index);
// The memory of device `index` in bytes (cudaDeviceProp::totalGlobalMem).
std::uint64_t device_memory_bytes(int index);

// An owned CUDA event (timing disabled: used for ordering and completion only).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  // Marks the current end of `stream`'s work.
  void record(cudaStream_t stream);
  // `stream` waits for the recorded work before running what is queued after this call.
  void wait_on(cudaStream_t stream) const;
  // True when the recorded work is done (cudaEventQuery); throws on a sticky error.
  bool done() const;
  void synchronize() const;
  cudaEvent_t handle() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// The streams of the current device, created on first use and kept for the process:
// compute (kernels, cuBLAS, cuSPARSE, copies issued by Tensor) and communication (NCCL, halo
// staging). Both are blocking streams, so the legacy default stream still orders against them.
cudaStream_t compute_stream();
cudaStream_t comm_stream();
// Blocks until the compute stream of the current device is idle.
void synchronize_compute();

// Whether ptr is GPU memory (cudaPointerGetAttributes); host memory, registered or not, is not,
// and nothing is without a usable GPU.
bool is_device_memory(const void* ptr);
// Host -> GPU copy queued on the compute stream (the source may be freed on return).
void upload(void* dst, const void* src, std::size_t bytes);
// GPU -> host copy after the compute stream's queued work; returns once the bytes arrived.
void download(void* dst, const void* src, std::size_t bytes);

}  // namespace tessera::cuda
