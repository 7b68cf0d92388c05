// SPDX-License-Identifier: Apache-2.0
// The cuBLAS and cuSPARSE handles of the current device, created on first use, bound to its
// compute stream and kept for the process (creating a handle costs milliseconds).
#pragma once

#include <cublas_v2.h>
#include <cusparse.h>

namespace tessera::cuda {

cublasHandle_t cublas_handle();
cusparseHandle_t cusparse_handle();

}  // namespace tessera::cuda
