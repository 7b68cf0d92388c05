# SPDX-License-Identifier: Apache-2.0
# Finds every third-party dependency (all Debian packages) and exposes them as imported targets.
# Nothing is vendored or downloaded: a missing package stops configuration with its Debian name.
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(ZLIB REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 2.0 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)  # .npz archives (datasets/npz.cc)
find_path(TESSERA_CBLAS_INCLUDE_DIR cblas.h HINTS ${OPENBLAS_INCLUDE_DIRS} REQUIRED)

if(NOT TARGET tessera::blas)
  add_library(tessera_blas INTERFACE)
  add_library(tessera::blas ALIAS tessera_blas)
  target_link_libraries(tessera_blas INTERFACE PkgConfig::OPENBLAS)
  target_include_directories(tessera_blas SYSTEM INTERFACE ${TESSERA_CBLAS_INCLUDE_DIR})
endif()

if(NOT TARGET tessera::hdf5)
  add_library(tessera_hdf5 INTERFACE)
  add_library(tessera::hdf5 ALIAS tessera_hdf5)
  target_link_libraries(tessera_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
  target_include_directories(tessera_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS})
  target_compile_definitions(tessera_hdf5 INTERFACE ${HDF5_C_DEFINITIONS})
endif()

# MPICH (Debian's mpich/libmpich-dev): MPI::MPI_CXX, MPIEXEC_EXECUTABLE for multi-rank tests.
find_package(MPI REQUIRED COMPONENTS CXX)

# METIS (libmetis-dev) ships no CMake config or .pc file. Debian builds it with 32-bit idx_t.
find_path(TESSERA_METIS_INCLUDE_DIR metis.h)
find_library(TESSERA_METIS_LIBRARY metis)
if(NOT TESSERA_METIS_INCLUDE_DIR OR NOT TESSERA_METIS_LIBRARY)
  message(FATAL_ERROR "METIS not found: install Debian's libmetis-dev")
endif()
if(NOT TARGET tessera::metis)
  add_library(tessera_metis INTERFACE)
  add_library(tessera::metis ALIAS tessera_metis)
  target_link_libraries(tessera_metis INTERFACE ${TESSERA_METIS_LIBRARY})
  target_include_directories(tessera_metis SYSTEM INTERFACE ${TESSERA_METIS_INCLUDE_DIR})
endif()

if(TESSERA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
