# SPDX-License-Identifier: Apache-2.0
# tessera_target_defaults(target part): the include path of the target's part (only the folders
# cmake/layering.txt lets it see, TesseraLayering.cmake), warnings (-Werror when TESSERA_WERROR)
# and code generation (-march=native when TESSERA_NATIVE_ARCH) for every Tessera target, so the
# flags live in one place.
function(tessera_target_defaults target part)
  tessera_part_include(${target} ${part})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow=local -Wnon-virtual-dtor)
  # GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string operator+
  # (GCC bug 105651); the warning stays on for other compilers and versions.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(TESSERA_NATIVE_ARCH)
    # The SpMM inner loops, dropout's Philox rounds and the elementwise kernels vectorise to
    # the widest SIMD the CPU has (AVX2/AVX-512) instead of the x86-64 baseline (SSE2).
    target_compile_options(${target} PRIVATE -march=native)
  endif()
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
