// SPDX-License-Identifier: Apache-2.0
// The loader of core/cuda/libraries.h. TESSERA_CUBLAS_SONAME, TESSERA_CUSPARSE_SONAME and
// TESSERA_CUDA_LIBRARY_DIR come from the build (core/CMakeLists.txt).
#include "core/cuda/libraries.h"

#include <dlfcn.h>

#include <string>

#include "core/error.h"

namespace tessera::cuda {
namespace {

// The library by its soname (the loader's search: LD_LIBRARY_PATH, the run paths, the cache),
// else from the directory the build found it in. Never closed.
void* open_library(const char* soname) {
  if (void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first_error = ::dlerror();
  const std::string path = std::string(TESSERA_CUDA_LIBRARY_DIR) + "/" + soname;
  if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  TESSERA_FAIL(Cuda, "cannot load ", soname, " (", first_error, "; ", path, ": ", ::dlerror(),
               "): the GPU backend needs it");
}

template <class F>
void resolve(F& slot, void* library, const char* soname, const char* symbol) {
  void* address = ::dlsym(library, symbol);
  TESSERA_CHECK(address != nullptr, Cuda, soname, " has no ", symbol,
                " (a library older than the one Tessera was built with?)");
  slot = reinterpret_cast<F>(address);
}

// Asks the dynamic loader, which matches a loaded object by its soname too (also one opened by
// its path, or loaded by anything else in the process); the probe's reference is dropped.
bool library_loaded(const char* soname) {
  void* handle = ::dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) ::dlclose(handle);
  return handle != nullptr;
}

}  // namespace

const CublasApi& cublas() {
  static const CublasApi api = [] {
    const char* soname = TESSERA_CUBLAS_SONAME;
    void* lib = open_library(soname);
    CublasApi a{};
    resolve(a.create, lib, soname, "cublasCreate_v2");
    resolve(a.set_stream, lib, soname, "cublasSetStream_v2");
    resolve(a.set_math_mode, lib, soname, "cublasSetMathMode");
    resolve(a.sgemm, lib, soname, "cublasSgemm_v2");
    resolve(a.sscal, lib, soname, "cublasSscal_v2");
    resolve(a.saxpy, lib, soname, "cublasSaxpy_v2");
    resolve(a.status_string, lib, soname, "cublasGetStatusString");
    resolve(a.status_name, lib, soname, "cublasGetStatusName");
    return a;
  }();
  return api;
}

const CusparseApi& cusparse() {
  static const CusparseApi api = [] {
    const char* soname = TESSERA_CUSPARSE_SONAME;
    void* lib = open_library(soname);
    CusparseApi a{};
    resolve(a.create, lib, soname, "cusparseCreate");
    resolve(a.set_stream, lib, soname, "cusparseSetStream");
    resolve(a.create_csr, lib, soname, "cusparseCreateCsr");
    resolve(a.destroy_sp_mat, lib, soname, "cusparseDestroySpMat");
    resolve(a.create_dn_mat, lib, soname, "cusparseCreateDnMat");
    resolve(a.destroy_dn_mat, lib, soname, "cusparseDestroyDnMat");
    resolve(a.dn_mat_set_values, lib, soname, "cusparseDnMatSetValues");
    resolve(a.spmm_buffer_size, lib, soname, "cusparseSpMM_bufferSize");
    resolve(a.spmm, lib, soname, "cusparseSpMM");
    resolve(a.error_string, lib, soname, "cusparseGetErrorString");
    resolve(a.error_name, lib, soname, "cusparseGetErrorName");
    return a;
  }();
  return api;
}

bool cublas_loaded() { return library_loaded(TESSERA_CUBLAS_SONAME); }
bool cusparse_loaded() { return library_loaded(TESSERA_CUSPARSE_SONAME); }

}  // namespace tessera::cuda
