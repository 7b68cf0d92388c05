// SPDX-License-Identifier: Apache-2.0
// One macro family for every CUDA vendor call: TESSERA_CUDA_CHECK (runtime), TESSERA_CUBLAS_CHECK
// and TESSERA_CUSPARSE_CHECK turn a failed status into tessera::Error(Cuda) carrying the call's
// text, the library's name for the status and the file:line of the call (NCCL's twin lives in
// comm/nccl_communicator.cc). Host code only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#include <string>

#include "core/error.h"

namespace tessera::cuda {
// "<message> (<enum name>)" for each library's status.
std::string error_string(cudaError_t status);
std::string error_string(cublasStatus_t status);
std::string error_string(cusparseStatus_t status);
}  // namespace tessera::cuda

#define TESSERA_CUDA_STATUS_CHECK_(category, success, call)                                 \
  do {                                                                                      \
    const auto tessera_cuda_status_ = (call);                                               \
    if (tessera_cuda_status_ != (success)) [[unlikely]] {                                   \
      TESSERA_FAIL(category, #call, " failed: ",                                            \
                   ::tessera::cuda::error_string(tessera_cuda_status_));                    \
    }                                                                                       \
  } while (0)

#define TESSERA_CUDA_CHECK(call) TESSERA_CUDA_STATUS_CHECK_(Cuda, cudaSuccess, call)
#define TESSERA_CUBLAS_CHECK(call) TESSERA_CUDA_STATUS_CHECK_(Cuda, CUBLAS_STATUS_SUCCESS, call)
#define TESSERA_CUSPARSE_CHECK(call) \
  TESSERA_CUDA_STATUS_CHECK_(Cuda, CUSPARSE_STATUS_SUCCESS, call)
// After a kernel launch: a bad configuration is reported by cudaGetLastError.
#define TESSERA_CUDA_CHECK_LAUNCH() TESSERA_CUDA_CHECK(cudaGetLastError())
