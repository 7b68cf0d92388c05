# SPDX-License-Identifier: Apache-2.0
# tessera_target_defaults(target part): the include path of the target's part (only the folders
# cmake/layering.txt lets it see, TesseraLayering.cmake), warnings (-Werror when TESSERA_WERROR)
# and code generation (no floating-point contraction; -march=native when TESSERA_NATIVE_ARCH)
# for every Tessera target, so the flags live in one place.
function(tessera_target_defaults target part)
  tessera_part_include(${target} ${part})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wnon-virtual-dtor)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wshadow=local)
  endif()
  # GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string operator+
  # (GCC bug 105651); the warning stays on for other compilers and versions.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  # a * b + c stays two rounded operations (no FMA contraction) on every instruction set, so the
  # CPU kernels' levels (core/cpu/cpu_level.h) give the same bits.
  target_compile_options(${target} PRIVATE -ffp-contract=off)
  if(TESSERA_NATIVE_ARCH)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# tessera_cpu_levels(target part source...): the sources (already in `target`, compiled for the
# baseline) compiled again for every further instruction-set level (core/cpu/cpu_level.h) when
# TESSERA_CPU_DISPATCH is on, as object libraries whose objects join `target`; those sources and
# the target's own get TESSERA_CPU_DISPATCH defined.
function(tessera_cpu_levels target part)
  if(NOT TESSERA_CPU_DISPATCH)
    return()
  endif()
  foreach(level 1 2 3)
    set(levels_target ${target}_cpu${level})
    add_library(${levels_target} OBJECT ${ARGN})
    tessera_target_defaults(${levels_target} ${part})
    target_compile_definitions(${levels_target} PRIVATE TESSERA_CPU_LEVEL=${level}
                               TESSERA_CPU_DISPATCH)
    # What the target's own sources compile with: its definitions and include paths (set later
    # too, e.g. the CUDA backend's) and the usage requirements of what it links to.
    target_compile_definitions(${levels_target} PRIVATE
                               $<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>)
    target_include_directories(${levels_target} PRIVATE
                               $<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>)
    target_link_libraries(${levels_target} PRIVATE $<TARGET_PROPERTY:${target},LINK_LIBRARIES>)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${levels_target}>)
  endforeach()
  target_compile_definitions(${target} PRIVATE TESSERA_CPU_DISPATCH)
endfunction()
