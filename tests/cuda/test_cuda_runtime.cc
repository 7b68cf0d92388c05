// SPDX-License-Identifier: Apache-2.0
// The CUDA runtime layer: GPU detection (no driver means no GPU, never a crash), --device cuda
// refused with a clear message where no GPU is usable, the error macros (call, status name,
// file and line), the allocator's size classes and block reuse, the shared Philox/dropout
// helpers against CounterRng and the CPU dropout on the host, and CUDA tensors where a GPU is.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/cuda/allocator.h"
#include "core/cuda/check.h"
#include "core/cuda/handles.h"
#include "core/cuda/libraries.h"
#include "core/cuda/philox.h"
#include "core/cuda/runtime.h"
#include "core/device.h"
#include "core/kernels.h"
#include "core/tensor.h"
#include "tests/core/test_util.h"

namespace tessera {
namespace {

using test::throws_error;

// First in this program, which links neither library itself: CPU work loads neither cuBLAS nor
// cuSPARSE (loaded, they cost about 180 MB of resident memory, GPU or not), and the first use of
// each loads it and resolves every entry point Tessera calls.
bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(library) != std::string::npos) return true;
  return false;
}

TEST(CudaLibraries, LoadedOnFirstUseNotByCpuWork) {
  std::vector<float> ones(64 * 32, 1.0f), halves(32 * 16, 0.5f);
  const Tensor a = Tensor::borrow(ones.data(), 64, 32);
  const Tensor b = Tensor::borrow(halves.data(), 32, 16);
  Tensor c(64, 16);
  gemm(c, a, false, b, false, 1.0f, 0.0f);  // the CPU's BLAS
  EXPECT_FLOAT_EQ(c.f32()[0], 16.0f);
  EXPECT_FALSE(cuda::cublas_loaded());
  EXPECT_FALSE(cuda::cusparse_loaded());
  EXPECT_FALSE(mapped("libcublas"));
  EXPECT_FALSE(mapped("libcusparse"));
  const cuda::CublasApi& blas = cuda::cublas();  // throws naming what is missing
  EXPECT_NE(blas.sgemm, nullptr);
  EXPECT_STREQ(blas.status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  const cuda::CusparseApi& sparse = cuda::cusparse();
  EXPECT_NE(sparse.spmm, nullptr);
  EXPECT_STREQ(sparse.error_name(CUSPARSE_STATUS_INVALID_VALUE), "CUSPARSE_STATUS_INVALID_VALUE");
  EXPECT_TRUE(cuda::cublas_loaded() && cuda::cusparse_loaded());
  EXPECT_TRUE(mapped("libcublas"));
  EXPECT_TRUE(mapped("libcusparse"));
}

TEST(CudaRuntime, DetectionIsConsistent) {
  const int count = cuda::device_count();
  EXPECT_GE(count, 0);
  EXPECT_EQ(cuda::cuda_available(), count > 0);
  EXPECT_EQ(cuda::unavailable_reason().empty(), count > 0) << cuda::unavailable_reason();
  std::printf("CUDA GPUs: %d%s%s\n", count, count ? "" : "; reason: ",
              cuda::unavailable_reason().c_str());
}

TEST(CudaRuntime, DeviceCudaWithoutGpuIsRefusedClearly) {
  if (cuda::cuda_available()) GTEST_SKIP() << "a GPU is present: the no-GPU path does not apply";
  for (const char* text : {"cuda", "cuda:0", "cuda:1"}) {
    EXPECT_TRUE(throws_error([&] { parse_device(text); }, ErrorCategory::Cuda,
                             "no usable CUDA GPU"));
    EXPECT_TRUE(throws_error([&] { parse_device(text); }, ErrorCategory::Cuda, "--device cpu"));
  }
  EXPECT_TRUE(throws_error([] { Tensor t(2, 3, DType::F32, Device{DeviceKind::Cuda, 0}); },
                           ErrorCategory::Cuda, "no usable CUDA GPU"));
  // Library handles fail with an Error, not a crash.
  EXPECT_TRUE(throws_error([] { cuda::cublas_handle(); }, ErrorCategory::Cuda));
  EXPECT_TRUE(throws_error([] { cuda::compute_stream(); }, ErrorCategory::Cuda));
  EXPECT_TRUE(throws_error([] { cuda::device_allocate(16); }, ErrorCategory::Cuda));
  // CPU work is unaffected.
  Tensor x = Tensor::zeros(2, 2);
  EXPECT_EQ(x.device(), Device::cpu());
}

TEST(CudaRuntime, DeviceNamesAreParsed) {
  EXPECT_TRUE(throws_error([] { parse_device("cuda:x"); }, ErrorCategory::InvalidArgument,
                           "cuda:x"));
  EXPECT_TRUE(throws_error([] { parse_device("cuda:"); }, ErrorCategory::InvalidArgument));
  if (!cuda::cuda_available()) GTEST_SKIP() << "no GPU: " << cuda::unavailable_reason();
  EXPECT_EQ(parse_device("cuda"), (Device{DeviceKind::Cuda, 0}));
  EXPECT_EQ(parse_device("cuda:0"), (Device{DeviceKind::Cuda, 0}));
  const std::string past = "cuda:" + std::to_string(cuda::device_count());
  EXPECT_TRUE(throws_error([&] { parse_device(past); }, ErrorCategory::Cuda, past));
}

cudaError_t failing_runtime_call() { return cudaErrorInvalidValue; }
cublasStatus_t failing_cublas_call() { return CUBLAS_STATUS_NOT_INITIALIZED; }
cusparseStatus_t failing_cusparse_call() { return CUSPARSE_STATUS_INVALID_VALUE; }

template <class Body>
void expect_vendor_error(Body&& body, const char* call, const char* status_name) {
  try {
    body();
    ADD_FAILURE() << call << " did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Cuda) << e.what();
    EXPECT_NE(e.message().find(call), std::string::npos) << e.what();
    EXPECT_NE(e.message().find(status_name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test_cuda_runtime.cc:"), std::string::npos) << e.what();
    EXPECT_GT(e.line(), 0);
  }
}

TEST(CudaRuntime, CheckMacrosNameTheCallTheStatusAndTheLine) {
  expect_vendor_error([] { TESSERA_CUDA_CHECK(failing_runtime_call()); }, "failing_runtime_call()",
                      "cudaErrorInvalidValue");
  expect_vendor_error([] { TESSERA_CUBLAS_CHECK(failing_cublas_call()); }, "failing_cublas_call()",
                      "CUBLAS_STATUS_NOT_INITIALIZED");
  expect_vendor_error([] { TESSERA_CUSPARSE_CHECK(failing_cusparse_call()); },
                      "failing_cusparse_call()", "CUSPARSE_STATUS_INVALID_VALUE");
}

TEST(CudaAllocator, SizeClasses) {
  EXPECT_EQ(cuda::allocation_class(0), 512u);
  EXPECT_EQ(cuda::allocation_class(1), 512u);
  EXPECT_EQ(cuda::allocation_class(512), 512u);
  EXPECT_EQ(cuda::allocation_class(513), 1024u);
  EXPECT_EQ(cuda::allocation_class((1u << 20) - 1), 1u << 20);
  EXPECT_EQ(cuda::allocation_class(1u << 20), 2u << 20);
  EXPECT_EQ(cuda::allocation_class((2u << 20) + 1), 4u << 20);
  EXPECT_EQ(cuda::allocation_class(5u << 20), 6u << 20);
}

TEST(CudaAllocator, FreedBlocksAreReusedWithoutNewDeviceAllocations) {
  if (!cuda::cuda_available()) GTEST_SKIP() << "no GPU: " << cuda::unavailable_reason();
  void* first = cuda::device_allocate(3000);
  const cuda::AllocatorStats before = cuda::allocator_stats();
  cuda::device_free(first);
  void* again = cuda::device_allocate(4000);  // same 4 KiB class
  EXPECT_EQ(again, first);
  EXPECT_EQ(cuda::allocator_stats().device_allocations, before.device_allocations);
  void* other = cuda::device_allocate(5000);  // 8 KiB class: a new block
  EXPECT_NE(other, first);
  cuda::device_free(again);
  cuda::device_free(other);
  cuda::release_cached_memory();
  EXPECT_EQ(cuda::allocator_stats().bytes_cached, 0u);
}

TEST(CudaTensor, RoundTripsZeroAndClone) {
  if (!cuda::cuda_available()) GTEST_SKIP() << "no GPU: " << cuda::unavailable_reason();
  const Device gpu{DeviceKind::Cuda, 0};
  const Tensor host = test::random_tensor(37, 9, 5);
  Tensor device_tensor(37, 9, DType::F32, gpu);
  backend(gpu).copy(device_tensor.raw(), host.raw(), host.bytes());
  const Tensor copy = device_tensor.clone();
  Tensor back(37, 9);
  backend(gpu).copy(back.raw(), copy.raw(), copy.bytes());
  EXPECT_TRUE(test::bitwise_equal(test::values_of(back), test::values_of(host), 9));
  device_tensor.zero();
  backend(gpu).copy(back.raw(), device_tensor.raw(), back.bytes());
  EXPECT_TRUE(test::bitwise_equal(test::values_of(back), std::vector<float>(37 * 9, 0.0f), 9));
}

// Host-side checks of what the GPU kernels compute: these run without a GPU.
TEST(CudaPhilox, WordsEqualCounterRngOnTheHost) {
  const CounterRng rng(42, 7, 2, RngPurpose::Dropout);
  for (std::uint64_t item : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{123456789},
                             (std::uint64_t{1} << 40) + 3, ~std::uint64_t{0}}) {
    for (std::uint32_t block : {0u, 1u, 63u, 1u << 20}) {
      const auto want = rng.words(item, block);
      const cuda::PhiloxWords got = cuda::philox_words(rng.key(), item, block);
      for (int k = 0; k < 4; ++k) EXPECT_EQ(got.w[k], want[static_cast<std::size_t>(k)]);
    }
  }
}

TEST(CudaPhilox, DropoutValuesEqualTheCpuKernelBitwise) {
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
    for (std::int64_t f : test::kWidths) {
      const std::int64_t r = 13;
      const CounterRng rng(9, 3, 1, RngPurpose::Dropout);
      std::vector<GlobalId> ids(static_cast<std::size_t>(r));
      for (std::int64_t i = 0; i < r; ++i) ids[static_cast<std::size_t>(i)] = 1000003 * i + 17;
      const Tensor x = test::random_tensor(r, f, 11);
      Tensor y(r, f);
      dropout_forward(y, x, p, rng, ids);
      std::vector<float> host(static_cast<std::size_t>(r * f));
      const float scale = 1.0f / (1.0f - p);
      for (std::int64_t row = 0; row < r; ++row) {
        for (std::int64_t k = 0; k < f; ++k) {
          const auto words = cuda::philox_words(
              rng.key(), static_cast<std::uint64_t>(ids[static_cast<std::size_t>(row)]),
              static_cast<std::uint32_t>(k / 4));
          host[static_cast<std::size_t>(row * f + k)] =
              cuda::dropout_value(x.f32()[row * f + k], words.w[k % 4], p, scale);
        }
      }
      EXPECT_TRUE(test::bitwise_equal(host, test::values_of(y), f)) << "p " << p << " F " << f;
    }
  }
}

}  // namespace
}  // namespace tessera
