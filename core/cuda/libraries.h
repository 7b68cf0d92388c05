// SPDX-License-Identifier: Apache-2.0
// cuBLAS and cuSPARSE, loaded on first use (dlopen) instead of linked: loading them costs a
// process about 180 MB of resident memory (libcublasLt's initialisation alone 148 MB), which a
// CUDA build paid on every CPU run. The first call of cublas() or cusparse() loads the library
// (by its soname, then from the directory it was built against) and resolves every entry point
// Tessera calls; a library or entry point that is missing is an Error(Cuda) naming it. Host code
// only; thread-safe.
#pragma once

#include <cublas_v2.h>
#include <cusparse.h>

namespace tessera::cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSscal_v2) sscal;
  decltype(&cublasSaxpy_v2) saxpy;
  decltype(&cublasGetStatusString) status_string;
  decltype(&cublasGetStatusName) status_name;
};

struct CusparseApi {
  decltype(&cusparseCreate) create;
  decltype(&cusparseSetStream) set_stream;
  decltype(&cusparseCreateCsr) create_csr;
  decltype(&cusparseDestroySpMat) destroy_sp_mat;
  decltype(&cusparseCreateDnMat) create_dn_mat;
  decltype(&cusparseDestroyDnMat) destroy_dn_mat;
  decltype(&cusparseDnMatSetValues) dn_mat_set_values;
  decltype(&cusparseSpMM_bufferSize) spmm_buffer_size;
  decltype(&cusparseSpMM) spmm;
  decltype(&cusparseGetErrorString) error_string;
  decltype(&cusparseGetErrorName) error_name;
};

const CublasApi& cublas();
const CusparseApi& cusparse();

// Whether the library is in this process, loaded by Tessera or anything else (tests: a CPU run
// must not have it).
bool cublas_loaded();
bool cusparse_loaded();

}  // namespace tessera::cuda
