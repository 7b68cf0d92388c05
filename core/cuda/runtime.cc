// SPDX-License-Identifier: Apache-2.0
// GPU detection that tolerates a missing driver, checked-status strings, events, and the
// per-device streams and library handles (created once under a lock, never destroyed: the
// process may end while the driver is already unloading).
#include "core/cuda/runtime.h"

#include <array>
#include <mutex>

#include "core/cuda/check.h"
#include "core/cuda/handles.h"
#include "core/cuda/libraries.h"

namespace tessera::cuda {
namespace {

struct Detection {
  int count = 0;
  std::string reason;
};

const Detection& detection() {
  static const Detection detected = [] {
    Detection d;
    int count = 0;  // not written when the call fails (no driver): keep 0
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();  // clear the non-sticky error so later queries start clean
      d.reason = "cudaGetDeviceCount: " + error_string(status);
      return d;
    }
    if (count <= 0) {
      d.reason = "cudaGetDeviceCount found no GPU";
      return d;
    }
    d.count = count;
    return d;
  }();
  return detected;
}

constexpr int kMaxDevices = 64;

struct DeviceState {
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
  cublasHandle_t cublas = nullptr;
  cusparseHandle_t cusparse = nullptr;
};

std::mutex g_state_mutex;
std::array<DeviceState, kMaxDevices> g_states;

int current_device() {
  int device = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&device));
  TESSERA_CHECK(device >= 0 && device < kMaxDevices, Internal, "CUDA device index ", device,
                " is outside [0, ", kMaxDevices, ")");
  return device;
}

// The current device's state with its streams created (handles are created by their getters).
DeviceState& state() {
  const int device = current_device();
  std::lock_guard lock(g_state_mutex);
  DeviceState& s = g_states[static_cast<std::size_t>(device)];
  if (!s.compute) TESSERA_CUDA_CHECK(cudaStreamCreate(&s.compute));
  if (!s.comm) TESSERA_CUDA_CHECK(cudaStreamCreate(&s.comm));
  return s;
}

}  // namespace

std::string error_string(cudaError_t status) {
  return detail::concat(cudaGetErrorString(status), " (", cudaGetErrorName(status), ")");
}
std::string error_string(cublasStatus_t status) {
  return detail::concat(cublas().status_string(status), " (", cublas().status_name(status), ")");
}
std::string error_string(cusparseStatus_t status) {
  return detail::concat(cusparse().error_string(status), " (", cusparse().error_name(status), ")");
}

int device_count() { return detection().count; }
bool cuda_available() { return detection().count > 0; }
std::string unavailable_reason() { return detection().reason; }

void require_device(int index, const char* what) {
  const Detection& d = detection();
  TESSERA_CHECK(d.count > 0, Cuda, what, ": no usable CUDA GPU on this machine (", d.reason,
                "); use --device cpu");
  TESSERA_CHECK(index >= 0 && index < d.count, Cuda, what, ": CUDA device ", index,
                " does not exist (this machine has ", d.count, d.count == 1 ? " GPU)" : " GPUs)");
  TESSERA_CUDA_CHECK(cudaSetDevice(index));
}

std::uint64_t device_memory_bytes(int index) {
  require_device(index, "the memory of a GPU");
  cudaDeviceProp prop{};
  TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return static_cast<std::uint64_t>(prop.totalGlobalMem);
}

std::string device_identity(int index) {
  cudaDeviceProp prop{};
  TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  std::string id = "GPU-";
  constexpr char kHex[] = "0123456789abcdef";
  for (const char byte : prop.uuid.bytes) {
    const auto b = static_cast<unsigned char>(byte);
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

Event::Event() { TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}
void Event::record(cudaStream_t stream) { TESSERA_CUDA_CHECK(cudaEventRecord(event_, stream)); }
void Event::wait_on(cudaStream_t stream) const {
  TESSERA_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}
bool Event::done() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  TESSERA_CUDA_CHECK(status);
  return true;
}
void Event::synchronize() const { TESSERA_CUDA_CHECK(cudaEventSynchronize(event_)); }

cudaStream_t compute_stream() { return state().compute; }
cudaStream_t comm_stream() { return state().comm; }
void synchronize_compute() { TESSERA_CUDA_CHECK(cudaStreamSynchronize(compute_stream())); }

cublasHandle_t cublas_handle() {
  DeviceState& s = state();
  std::lock_guard lock(g_state_mutex);
  if (!s.cublas) {
    TESSERA_CUBLAS_CHECK(cublas().create(&s.cublas));
    TESSERA_CUBLAS_CHECK(cublas().set_stream(s.cublas, s.compute));
    // Full fp32 (no TF32): the GPU must agree with the CPU's SGEMM to float rounding.
    TESSERA_CUBLAS_CHECK(cublas().set_math_mode(s.cublas, CUBLAS_DEFAULT_MATH));
  }
  return s.cublas;
}

cusparseHandle_t cusparse_handle() {
  DeviceState& s = state();
  std::lock_guard lock(g_state_mutex);
  if (!s.cusparse) {
    TESSERA_CUSPARSE_CHECK(cusparse().create(&s.cusparse));
    TESSERA_CUSPARSE_CHECK(cusparse().set_stream(s.cusparse, s.compute));
  }
  return s.cusparse;
}

bool is_device_memory(const void* ptr) {
  if (ptr == nullptr || !cuda_available()) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // not a pointer CUDA knows: host memory
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

void upload(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, compute_stream()));
}

void download(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  cudaStream_t stream = compute_stream();
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace tessera::cuda
