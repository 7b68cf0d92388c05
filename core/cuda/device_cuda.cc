// SPDX-License-Identifier: Apache-2.0
// CudaBackend: Tensor storage on a GPU. allocate/deallocate go through the caching pool; zeroing
// is queued on the compute stream (later kernels on that stream see it); copy may move between
// host and device in either direction (cudaMemcpyDefault, unified addressing) and returns only
// when the bytes arrived, so a host reader may use them at once.
#include "core/cuda/device_cuda.h"

#include <array>
#include <memory>
#include <mutex>

#include "core/cuda/allocator.h"
#include "core/cuda/check.h"
#include "core/cuda/runtime.h"

namespace tessera::cuda {
namespace {

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(int index) : index_(index) {}
  void* allocate(std::size_t bytes) override {
    TESSERA_CUDA_CHECK(cudaSetDevice(index_));
    return device_allocate(bytes);
  }
  void deallocate(void* ptr, std::size_t) override { device_free(ptr); }
  void memset_zero(void* ptr, std::size_t bytes) override {
    if (bytes == 0) return;
    TESSERA_CUDA_CHECK(cudaSetDevice(index_));
    TESSERA_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, compute_stream()));
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    TESSERA_CUDA_CHECK(cudaSetDevice(index_));
    cudaStream_t stream = compute_stream();
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

 private:
  int index_;
};

}  // namespace

DeviceBackend& device_backend(int index) {
  require_device(index, "CUDA tensor");
  static std::mutex mutex;
  static std::array<std::unique_ptr<CudaBackend>, 64> backends;
  std::lock_guard lock(mutex);
  auto& slot = backends.at(static_cast<std::size_t>(index));
  if (!slot) slot = std::make_unique<CudaBackend>(index);
  return *slot;
}

}  // namespace tessera::cuda
