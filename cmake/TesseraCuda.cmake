# SPDX-License-Identifier: Apache-2.0
# The optional CUDA backend. TESSERA_CUDA defaults to ON when nvcc (check_language) and the CUDA
# toolkit are both found, and builds core/cuda (cuSPARSE, cuBLAS, custom kernels) and the
# NCCL communicator for sm_80 (A100) and sm_90 (H100/H200). Only the runtime libraries are
# linked (cudart, cuBLAS, cuSPARSE, NCCL), never the driver library: a CUDA-enabled binary must
# start on a machine without a GPU driver and run on the CPU there.
include(CheckLanguage)
check_language(CUDA)
set(tessera_cuda_default OFF)
if(CMAKE_CUDA_COMPILER)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(tessera_cuda_default ON)
  endif()
endif()
option(TESSERA_CUDA "Build the CUDA backend (cuSPARSE, cuBLAS, NCCL)" ${tessera_cuda_default})

if(TESSERA_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "TESSERA_CUDA=ON but no CUDA compiler (nvcc) was found; install the CUDA "
                        "toolkit or configure with -DTESSERA_CUDA=OFF")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90 CACHE STRING "GPU architectures (A100, H100/H200)")
  endif()
  # One shared cudart for the whole process (the .cu objects and the C++ files that call the
  # runtime must not each carry their own static copy).
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  # CMake 3.25 knows no C++20 flag for nvcc (which has taken -std=c++20 since CUDA 12).
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)

  # NCCL ships no CMake package: look next to the toolkit first.
  find_path(TESSERA_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(TESSERA_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(NOT TESSERA_NCCL_INCLUDE_DIR OR NOT TESSERA_NCCL_LIBRARY)
    message(FATAL_ERROR "NCCL not found (nccl.h, libnccl) next to CUDA ${CUDAToolkit_VERSION}; "
                        "install NCCL or configure with -DTESSERA_CUDA=OFF")
  endif()
  if(NOT TARGET tessera::nccl)
    add_library(tessera_nccl INTERFACE)
    add_library(tessera::nccl ALIAS tessera_nccl)
    target_link_libraries(tessera_nccl INTERFACE ${TESSERA_NCCL_LIBRARY} CUDA::cudart)
    target_include_directories(tessera_nccl SYSTEM INTERFACE ${TESSERA_NCCL_INCLUDE_DIR})
  endif()
  message(STATUS "Tessera CUDA backend: CUDA ${CUDAToolkit_VERSION}, architectures "
                 "${CMAKE_CUDA_ARCHITECTURES}, NCCL ${TESSERA_NCCL_LIBRARY}")
else()
  message(STATUS "Tessera CUDA backend: off (CPU only)")
endif()
